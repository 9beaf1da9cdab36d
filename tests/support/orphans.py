"""Waiting on conditions, counting side effects, and making real orphans, for the tests of
leases, resume and reconciliation.

An orphan is made the way it happens: ``supervisor run support.run_factories:crm_agent`` waits
on its ``create_customer`` proposal and is SIGKILLed.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from supervisor.ledger.service import ApprovalLedger
from support.cli import SUPERVISOR
from support.run_factories import CRM_QUERY

CRM_FACTORY = "support.run_factories:crm_agent"


def until(condition: Callable[[], Any], what: str, timeout: float = 90.0) -> Any:
    """Poll ``condition`` until it returns something truthy (fails after a generous bound)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def side_effects(folder: Path) -> list[str]:
    """The lines the test tools wrote to ``SIDE_EFFECT_FILE`` (``folder/side_effects.log``)."""
    path = folder / "side_effects.log"
    return path.read_text().splitlines() if path.exists() else []


def orphan_of_a_killed_run(env: Mapping[str, str], ledger: ApprovalLedger) -> str:
    """Start the CRM ``supervisor run``, wait until it waits on its proposal, SIGKILL it;
    returns the proposal's id. ``env`` is the whole environment of the run."""
    assert SUPERVISOR is not None
    run = subprocess.Popen(
        [SUPERVISOR, "run", CRM_FACTORY, "--input", CRM_QUERY], env=dict(env),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:

        def waiting() -> str | None:
            pending = ledger.list(status="pending").items
            if pending and ledger.waiter_alive(pending[0].proposal_id):
                return pending[0].proposal_id
            return None

        proposal_id: str = until(waiting, "the run to wait on its proposal")
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    return proposal_id
