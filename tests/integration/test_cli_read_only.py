"""Read commands never create a ledger, and still work on a ledger they cannot write.

Each runs the real ``supervisor`` console script against real SQLite files; the read-only
storage is a real read-only bind mount (root, in a private mount namespace) or, without root,
a folder and file without write permission.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import SUPERVISOR, assert_one_line_error, run_cli, snapshot

from supervisor.ledger.models import TraceEvent
from supervisor.store.provider import SQLModelProvider

SCHEMA_HASH = "5" * 64

READ_COMMANDS = [
    pytest.param(["proposals", "list"], id="proposals-list"),
    pytest.param(["proposals", "list", "--json"], id="proposals-list-json"),
    pytest.param(["proposals", "show", "0" * 32], id="proposals-show"),
    pytest.param(["traces", "tail"], id="traces-tail"),
    pytest.param(["traces", "export", "-o", "out.jsonl"], id="traces-export"),
    pytest.param(["traces", "push", "http://127.0.0.1:9"], id="traces-push"),
    pytest.param(["traces", "analyze"], id="traces-analyze"),
    pytest.param(["audit", "verify"], id="audit-verify"),
    pytest.param(["audit", "head"], id="audit-head"),
    pytest.param(["policy", "show"], id="policy-show"),
    pytest.param(["policy", "history"], id="policy-history"),
    pytest.param(["notify", "list"], id="notify-list"),
    pytest.param(["notify", "deliveries", "--json"], id="notify-deliveries"),
]


def _fill(url: str) -> str:
    """A ledger with one pending proposal and a trace event; returns the proposal id."""
    with SQLModelProvider(url) as provider:
        proposal = provider.ledger.propose(
            "create_customer", SCHEMA_HASH, {"name": "Ada"}, owner="crm-agent", domains=["crm"]
        )
        provider.ledger.append_trace(
            [TraceEvent(at=provider.ledger.clock.now(), agent_id="crm-agent",
                        kind="tool_result", tool="inventory_lookup", outcome_status="success")]
        )  # fmt: skip
    return proposal.proposal_id


@pytest.mark.parametrize("command", READ_COMMANDS)
def test_read_commands_refuse_a_missing_ledger_and_create_nothing(
    command: list[str], tmp_path: Path
) -> None:
    typo = tmp_path / "typo" / "ledger.db"
    result = run_cli(*command, "--db", str(typo), cwd=tmp_path)
    assert_one_line_error(result, "ledger_not_found")
    assert str(typo) in result.stderr
    assert snapshot(tmp_path) == {}  # no folder, no ledger, no output file


@pytest.mark.parametrize("db", [":memory:", "sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_or_memory_named_ledger_is_refused(db: str, tmp_path: Path) -> None:
    result = run_cli("audit", "verify", "--db", db, cwd=tmp_path)
    assert_one_line_error(result, "ledger_not_found")
    assert "audit chain ok" not in result.stdout
    assert snapshot(tmp_path) == {}  # in particular no file named ":memory:"


def test_default_ledger_is_not_created_by_a_read(tmp_path: Path) -> None:
    env = {"SUPERVISOR_HOME": str(tmp_path / "home")}
    env_without_db = {key: value for key, value in os.environ.items() if key != "SUPERVISOR_DB"}
    assert SUPERVISOR is not None
    result = subprocess.run(
        [SUPERVISOR, "proposals", "list"], capture_output=True, text=True,
        env={**env_without_db, **env}, timeout=90, cwd=tmp_path,
    )  # fmt: skip
    assert_one_line_error(result, "ledger_not_found")
    assert str(tmp_path / "home" / "ledger.db") in result.stderr
    assert snapshot(tmp_path) == {}


def test_a_decision_on_a_missing_ledger_creates_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "typo.db"
    result = run_cli("proposals", "approve", "0" * 32, "--db", str(typo), cwd=tmp_path)
    assert_one_line_error(result, "ledger_not_found")
    assert snapshot(tmp_path) == {}


@pytest.mark.postgres
def test_reading_an_empty_postgres_database_creates_no_tables(postgres_url: str) -> None:
    result = run_cli("proposals", "list", "--db", postgres_url)
    assert_one_line_error(result, "not_a_ledger")
    engine = sa.create_engine(postgres_url)
    try:
        with engine.connect() as connection:
            assert sa.inspect(connection).get_table_names() == []
    finally:
        engine.dispose()


def _read_only_storage_runner(folder: Path) -> list[str]:
    """A command prefix that runs its arguments with ``folder`` read-only, or skips."""
    if os.geteuid() != 0:
        for path in folder.iterdir():
            path.chmod(0o444)
        folder.chmod(0o555)
        return []
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs unshare and mount to make a read-only bind mount as root")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a mount namespace: {probe.stderr!r}")
    remount = (
        f'mount --bind "{folder}" "{folder}" && mount -o remount,bind,ro "{folder}" '
        f'&& ! touch "{folder}/probe" 2>/dev/null && exec "$@"'
    )
    return ["unshare", "-m", "sh", "-c", remount, "sh"]


def _run_read_only(prefix: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    assert SUPERVISOR is not None
    return subprocess.run([*prefix, SUPERVISOR, *args], capture_output=True, text=True, timeout=90)


_COUNT_REVIEW_ROWS = (
    "import sys\n"
    "from supervisor.services.review.rows import iter_ledger\n"
    "print(sum(len(rows) for rows in iter_ledger(sys.argv[1])))\n"
)


def _leave_unchecked_wal(url: str) -> str:
    """Write a proposal from a process that dies without closing, so it stays in the WAL."""
    script = (
        "import os, sys\n"
        "from supervisor.store.provider import SQLModelProvider\n"
        "provider = SQLModelProvider(sys.argv[1])\n"
        "proposal = provider.ledger.propose('create_customer', '5' * 64, {'name': 'Bo'})\n"
        "print(proposal.proposal_id, flush=True)\n"
        "os._exit(0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, url], capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("leftover_wal", [False, True], ids=["clean", "crashed-writer"])
def test_a_ledger_on_read_only_storage_can_be_listed_and_verified(
    leftover_wal: bool, tmp_path: Path
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    ledger = folder / "ledger.db"
    url = f"sqlite:///{ledger}"
    expected = [_fill(url)]
    if leftover_wal:
        expected.append(_leave_unchecked_wal(url))
        assert (folder / "ledger.db-wal").stat().st_size > 0
    before = snapshot(folder)
    prefix = _read_only_storage_runner(folder)
    try:
        listed = _run_read_only(prefix, "proposals", "list", "--json", "--db", str(ledger))
        assert listed.returncode == 0, listed.stderr
        ids = [item["proposal_id"] for item in json.loads(listed.stdout)["items"]]
        assert ids == expected  # a proposal only in the WAL is seen too
        shown = _run_read_only(prefix, "proposals", "show", expected[0], "--db", str(ledger))
        assert shown.returncode == 0, shown.stderr
        assert "owner       crm-agent" in shown.stdout
        verified = _run_read_only(prefix, "audit", "verify", "--db", str(ledger))
        assert verified.returncode == 0, verified.stderr
        assert f"audit chain ok: {len(expected)} records" in verified.stdout
        exported = _run_read_only(prefix, "traces", "export", "--db", str(ledger))
        assert exported.returncode == 0, exported.stderr
        assert json.loads(exported.stdout.splitlines()[0])["tool"] == "inventory_lookup"
        for command in (["audit", "head"], ["policy", "show"], ["policy", "history"]):
            done = _run_read_only(prefix, *command, "--db", str(ledger))
            assert done.returncode == 0, (command, done.stderr)
        reviewed = subprocess.run(
            [*prefix, sys.executable, "-c", _COUNT_REVIEW_ROWS, url],
            capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert reviewed.returncode == 0, reviewed.stderr
        assert reviewed.stdout.strip() == "1"  # the offline review reads it too
        refused = _run_read_only(prefix, "proposals", "approve", expected[0], "--db", str(ledger))
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
    finally:
        folder.chmod(0o755)
        for path in folder.iterdir():
            path.chmod(0o644)
    assert snapshot(folder) == before
