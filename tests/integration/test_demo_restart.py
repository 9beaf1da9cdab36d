"""The demo's restart story: quit a demo while its agents wait, start it again, and the earlier
run's proposals show as orphans; approving one resumes it and its agent's run completes.

Real parts: two ``supervisor demo --no-tui`` processes in a row on one demo folder, the first
stopped with SIGTERM (as closing its terminal does) while the CRM and sandbox agents wait.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from support.cli import SUPERVISOR, run_cli

from supervisor.errors import SupervisorError
from supervisor.ledger.models import ProposalStatus
from supervisor.store.provider import SQLModelProvider

WAITING = ("create_customer", "run_code")


def _waiting_tools(url: str) -> set[str]:
    try:
        with SQLModelProvider(url, read_only=True) as provider:
            pending = provider.ledger.list(status="pending").items
            alive = provider.ledger.waiters([p.proposal_id for p in pending])
            return {p.tool_name for p in pending if p.proposal_id in alive}
    except SupervisorError:  # the first demo has not created its ledger yet
        return set()


def test_a_restarted_demo_shows_the_earlier_runs_proposals_as_orphans_and_resumes_them(
    tmp_path: Path,
) -> None:
    home = tmp_path / "demo"
    url = f"sqlite:///{home / 'ledger.db'}"
    assert SUPERVISOR is not None
    first = subprocess.Popen(
        [SUPERVISOR, "demo", "--no-tui", "--home", str(home)], cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not set(WAITING) <= _waiting_tools(url):
            assert time.monotonic() < deadline, "the first demo's agents never waited"
            assert first.poll() is None, first.stdout.read() if first.stdout else ""
            time.sleep(0.2)
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    with SQLModelProvider(url, read_only=True) as provider:
        left = {p.tool_name: p.proposal_id for p in provider.ledger.list(status="pending").items}
        orphans = provider.ledger.orphans(provider.ledger.list(status="pending").items)
    earlier = {tool: left[tool] for tool in WAITING}
    assert set(earlier.values()) <= set(orphans)  # quitting released the agents' leases at once

    second = run_cli(
        "demo", "--no-tui", "--auto-approve", "--home", str(home), cwd=tmp_path, timeout=600
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-2000:]
    for tool, proposal_id in earlier.items():
        assert f"Orphaned (from an earlier demo, its agent is gone): {proposal_id} {tool}" in (
            second.stdout
        )
        assert f"Resuming {proposal_id} in resume-" in second.stdout
    assert "All demo agents finished." in second.stdout
    with SQLModelProvider(url, read_only=True) as provider:
        for proposal_id in earlier.values():
            assert provider.ledger.get(proposal_id).status is ProposalStatus.EXECUTED
        resumes = [p for p in provider.ledger.list_processes() if p.process_id.startswith("resume")]
    assert sorted((p.status, p.exit_code) for p in resumes) == [("exited", 0), ("exited", 0)]
    logs = "".join(path.read_text() for path in (home / "logs").glob("resume-*.log"))
    assert logs.count("[resume] completed: Done:") == 2
