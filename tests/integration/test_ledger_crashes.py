"""Crashes: a real process is SIGKILLed at each point of a proposal's life, then a new one resumes.

The child (``support.ledger_proc crash``) prints ``crash-point POINT`` and blocks exactly there;
the test kills it with SIGKILL and reaps it (so its pid is really gone), then runs a fresh
``restart`` process twice. Side effects are counted in an outside file the ledger knows nothing
about, so "nothing ran twice" is checked against the world, not against the ledger's own word.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.ledger import ApprovalAlreadyDecided, NotApproved, ProposalStatus
from supervisor.store.provider import SQLModelProvider

TESTS_DIR = Path(__file__).resolve().parents[1]
_ENV = {**os.environ, "PYTHONPATH": str(TESTS_DIR)}


def _crash_at(url: str, point: str, side_effects: Path) -> str:
    """Run the child to ``point``, SIGKILL it there, reap it; return its proposal id."""
    child = subprocess.Popen(
        [sys.executable, "-m", "support.ledger_proc", "crash", url, point, str(side_effects)],
        env=_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        proposed = child.stdout.readline().split()
        assert proposed[:1] == ["proposed"], proposed
        marker = child.stdout.readline().strip()
        assert marker == f"crash-point {point}", marker
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return proposed[1]


def _restart(url: str, side_effects: Path) -> dict[str, Any]:
    """A brand-new process opening the same ledger: recover, then resume what may run."""
    done = subprocess.run(
        [sys.executable, "-m", "support.ledger_proc", "restart", url, str(side_effects)],
        env=_ENV, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _side_effects(path: Path, proposal_id: str) -> int:
    """How many times the outside world saw the tool run for ``proposal_id``."""
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line.split()[-1] == proposal_id)


@pytest.fixture
def side_effects(tmp_path: Path) -> Path:
    return tmp_path / "side_effects.log"


@pytest.fixture
def provider(ledger_url: str) -> Iterator[SQLModelProvider]:
    with SQLModelProvider(ledger_url) as opened:
        yield opened


def test_killed_after_propose_keeps_the_pending_proposal(
    ledger_url: str, side_effects: Path, provider: SQLModelProvider
) -> None:
    proposal_id = _crash_at(ledger_url, "after-propose", side_effects)

    first = _restart(ledger_url, side_effects)
    assert first["statuses"] == {proposal_id: "pending"}
    assert first["recovered"] == [] and first["ran"] == []
    assert first["refused"] == {proposal_id: NotApproved.code}
    assert first["audit_ok"] is True
    assert _side_effects(side_effects, proposal_id) == 0

    # Still a live proposal: approved now, it runs exactly once however often we restart.
    provider.ledger.approve(proposal_id, "op@example.com", "after the crash")
    assert _restart(ledger_url, side_effects)["ran"] == [proposal_id]
    again = _restart(ledger_url, side_effects)
    assert again["ran"] == [] and again["refused"] == {proposal_id: ApprovalAlreadyDecided.code}
    assert _side_effects(side_effects, proposal_id) == 1
    assert provider.ledger.get(proposal_id).status is ProposalStatus.EXECUTED


def test_killed_after_approve_runs_once_on_restart(
    ledger_url: str, side_effects: Path, provider: SQLModelProvider
) -> None:
    proposal_id = _crash_at(ledger_url, "after-approve", side_effects)
    assert provider.ledger.get(proposal_id).status is ProposalStatus.APPROVED

    first = _restart(ledger_url, side_effects)
    assert first["recovered"] == []
    assert first["ran"] == [proposal_id]
    assert first["statuses"] == {proposal_id: "executed"}
    second = _restart(ledger_url, side_effects)
    assert second["ran"] == []
    assert second["refused"] == {proposal_id: ApprovalAlreadyDecided.code}
    assert second["audit_ok"] is True
    assert _side_effects(side_effects, proposal_id) == 1


@pytest.mark.parametrize(
    ("point", "effects_seen"),
    [("after-claim", 0), ("during-side-effect", 1)],
    ids=["after-claim", "during-side-effect"],
)
def test_killed_while_executing_needs_reconciliation_and_never_reruns(
    ledger_url: str,
    side_effects: Path,
    provider: SQLModelProvider,
    point: str,
    effects_seen: int,
) -> None:
    proposal_id = _crash_at(ledger_url, point, side_effects)
    ledger = provider.ledger
    assert ledger.get(proposal_id).status is ProposalStatus.EXECUTING
    assert _side_effects(side_effects, proposal_id) == effects_seen

    first = _restart(ledger_url, side_effects)
    assert first["recovered"] == [proposal_id]
    assert first["ran"] == []
    assert first["refused"] == {proposal_id: ApprovalAlreadyDecided.code}
    assert first["statuses"] == {proposal_id: "needs_reconciliation"}
    assert first["audit_ok"] is True

    second = _restart(ledger_url, side_effects)
    assert second["recovered"] == [] and second["ran"] == []
    assert second["statuses"] == {proposal_id: "needs_reconciliation"}
    assert _side_effects(side_effects, proposal_id) == effects_seen

    execution = ledger.execution(proposal_id)
    assert execution is not None
    assert execution.state == "needs_reconciliation"
    assert execution.executor.executor_id == "crash-executor"
    assert (
        execution.reason is not None and "stopped before recording an outcome" in execution.reason
    )
    with pytest.raises(ApprovalAlreadyDecided) as refused:
        ledger.claim(proposal_id, ledger.get(proposal_id).args_hash, executor="test")
    assert refused.value.status == "needs_reconciliation"
    assert refused.value.by == "crash-executor"
    actions = [e.action for e in ledger.events_since(0) if e.subject == proposal_id]
    assert actions == ["propose", "approve", "claim", "needs_reconciliation"]
    assert ledger.verify().ok
