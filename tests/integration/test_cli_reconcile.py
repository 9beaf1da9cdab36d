"""Recovery at the start of every ``supervisor proposals`` verb, through the real console script.

- A live pid whose process row's lease ran out (the executor died and its pid was reused: here
  the pid is this test's own) is flagged by ``proposals list``.
- On a ledger on read-only storage, the read verbs still work and change nothing: the stranded
  call shows as ``executing`` until a process that can write looks.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.cli import SUPERVISOR, run_cli, snapshot

from supervisor.ledger.models import ExecutorIdentity, ProcessRecord, Proposal
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider

HOST = socket.gethostname()


def _stranded(ledger: ApprovalLedger, pid: int) -> Proposal:
    proposal = ledger.propose("charge_card", "5" * 64, {"order": "A-1"}, owner="billing-agent")
    ledger.approve(proposal.proposal_id, "op")
    executor = ExecutorIdentity(executor_id="agent:billing-agent", pid=pid, host=HOST)
    ledger.claim(proposal.proposal_id, proposal.args_hash, executor)
    return proposal


def _statuses(url: str) -> dict[str, str]:
    done = run_cli("proposals", "list", "--all", "--json", "--db", url)
    assert done.returncode == 0, done.stderr
    return {item["proposal_id"]: item["status"] for item in json.loads(done.stdout)["items"]}


def _row(ledger: ApprovalLedger, process_id: str, pid: int, **fields: object) -> None:
    now = datetime.now(UTC)
    row = {
        "process_id": process_id,
        "kind": "agent_run",
        "pid": pid,
        "host": HOST,
        "status": "running",
        "started_at": now - timedelta(seconds=10),
        "heartbeat_at": now,
    }
    ledger.upsert_process(ProcessRecord.model_validate({**row, **fields}))  # fmt: skip


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_list_flags_a_live_pid_whose_executor_row_is_gone(
    engine: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if engine == "sqlite" else "postgres_url")
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    with SQLModelProvider(url) as provider:
        ledger = provider.ledger
        # An earlier process had this test's pid and ended before the claim: not the executor.
        _row(ledger, "run-old", os.getpid(), status="exited", started_at=long_ago,
             heartbeat_at=long_ago + timedelta(minutes=1))  # fmt: skip
        earlier = _stranded(ledger, os.getpid())
        # The executor of ``reused`` is run-now, whose pid (our parent's) is running.
        _row(ledger, "run-now", os.getppid())
        reused = _stranded(ledger, os.getppid())
    assert _statuses(url) == {earlier.proposal_id: "executing", reused.proposal_id: "executing"}
    with SQLModelProvider(url) as provider:
        provider.ledger.heartbeat("run-now", status="lost")  # its lease is gone: it died
    statuses = _statuses(url)  # the pid still runs (another process has it now): dead anyway
    assert statuses == {
        earlier.proposal_id: "executing",
        reused.proposal_id: "needs_reconciliation",
    }


def _read_only(folder: Path) -> list[str]:
    """A command prefix that runs its arguments with ``folder`` read-only, or skips."""
    if os.geteuid() != 0:
        for path in folder.iterdir():
            path.chmod(0o444)
        folder.chmod(0o555)
        return []
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs unshare and mount to make a read-only bind mount as root")
    if subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30).returncode:
        pytest.skip("cannot create a mount namespace")
    remount = (
        f'mount --bind "{folder}" "{folder}" && mount -o remount,bind,ro "{folder}" '
        f'&& ! touch "{folder}/probe" 2>/dev/null && exec "$@"'
    )
    return ["unshare", "-m", "sh", "-c", remount, "sh"]


def test_read_verbs_on_read_only_storage_show_a_stranded_call_and_change_nothing(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    ledger_path = folder / "ledger.db"
    with SQLModelProvider(f"sqlite:///{ledger_path}") as provider:
        child = subprocess.Popen(["true"])
        child.wait()
        proposal = _stranded(provider.ledger, child.pid)  # its executor is gone
    before = snapshot(folder)
    prefix = _read_only(folder)
    assert SUPERVISOR is not None
    try:
        for verb in (["list", "--all", "--json"], ["show", proposal.proposal_id]):
            done = subprocess.run(
                [*prefix, SUPERVISOR, "proposals", *verb, "--db", str(ledger_path)],
                capture_output=True, text=True, timeout=90,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert "executing" in done.stdout and "Traceback" not in done.stderr
    finally:
        folder.chmod(0o755)
        for path in folder.iterdir():
            path.chmod(0o644)
    assert snapshot(folder) == before
    assert _statuses(str(ledger_path))[proposal.proposal_id] == "needs_reconciliation"
