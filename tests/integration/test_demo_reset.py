"""``supervisor demo --reset``: the next demo starts from an empty ledger, and nothing but the
demo's own files is removed; a demo that is still running is never emptied under its agents."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.cli import assert_one_line_error, run_cli, snapshot

from supervisor.demo.run import DemoStillRunning, reset_home
from supervisor.ledger.models import ProcessRecord, ProposalStatus
from supervisor.store.provider import SQLModelProvider

SCHEMA_HASH = "5" * 64


def _old_demo(home: Path) -> str:
    """A demo folder as a previous run leaves it: a ledger with one pending proposal and logs,
    plus a file of the user's own; returns the pending proposal's id."""
    (home / "logs").mkdir(parents=True)
    (home / "logs" / "crm.log").write_text("[crm] waiting for a decision\n")
    (home / "notes.txt").write_text("mine, not the demo's\n")
    with SQLModelProvider(f"sqlite:///{home / 'ledger.db'}") as provider:
        proposal = provider.ledger.propose("create_customer", SCHEMA_HASH, {"name": "Ada"})
    return proposal.proposal_id


def _register(home: Path, *, status: str, heartbeat: datetime) -> None:
    with SQLModelProvider(f"sqlite:///{home / 'ledger.db'}") as provider:
        provider.ledger.upsert_process(
            ProcessRecord(
                process_id="run-still-here", kind="agent_run", pid=os.getpid(),
                host=socket.gethostname(), command="supervisor.demo.agent crm", status=status,
                started_at=heartbeat, heartbeat_at=heartbeat,
            )
        )  # fmt: skip


def test_reset_removes_only_the_demos_ledger_and_logs(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    _old_demo(home)
    _register(home, status="exited", heartbeat=datetime.now(UTC) - timedelta(hours=1))
    removed = reset_home(home)
    assert {path.name for path in removed} >= {"ledger.db", "crm.log"}
    assert not (home / "ledger.db").exists() and not list((home / "logs").glob("*.log"))
    assert (home / "notes.txt").read_text() == "mine, not the demo's\n"
    assert reset_home(home) == []  # a second reset finds nothing to remove


def test_reset_refuses_while_a_demo_process_is_alive_and_removes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    pending = _old_demo(home)
    _register(home, status="waiting_for_approval", heartbeat=datetime.now(UTC))
    before = snapshot(home)
    with pytest.raises(DemoStillRunning, match="run-still-here"):
        reset_home(home)
    result = run_cli("demo", "--reset", "--no-tui", "--home", str(home), cwd=tmp_path)
    assert_one_line_error(result, "demo_still_running")
    assert snapshot(home) == before
    with SQLModelProvider(f"sqlite:///{home / 'ledger.db'}", read_only=True) as provider:
        assert provider.ledger.get(pending).status is ProposalStatus.PENDING


def test_the_demo_after_reset_shows_none_of_the_previous_runs_proposals(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    previous = _old_demo(home)
    result = run_cli(  # no --no-tui: --auto-approve says it follows along here instead
        "demo", "--reset", "--auto-approve", "--home", str(home), cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"Reset the demo in {home}" in result.stdout
    assert (
        "--auto-approve decides every proposal itself, so the demo follows along in this "
        "terminal instead of opening the TUI" in result.stdout
    )
    assert "All demo agents finished." in result.stdout
    with SQLModelProvider(f"sqlite:///{home / 'ledger.db'}", read_only=True) as provider:
        ids = {proposal.proposal_id for proposal in provider.ledger.list(status=None).items}
        tools = {proposal.tool_name for proposal in provider.ledger.list(status=None).items}
    assert previous not in ids
    assert "run_code" in tools  # the new run's proposals are there
    assert (home / "notes.txt").exists()
