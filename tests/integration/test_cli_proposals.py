"""``supervisor proposals|traces|audit`` as a real console script against a SQLite ledger."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from support.cli import SUPERVISOR

from supervisor.ledger.models import ProposalStatus, TraceEvent
from supervisor.store.provider import SQLModelProvider

SCHEMA_HASH = "5" * 64


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    assert SUPERVISOR is not None, "the console script is not installed"
    return subprocess.run([SUPERVISOR, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def _propose(db: str, **arguments: object) -> str:
    with SQLModelProvider(db) as provider:
        proposal = provider.ledger.propose(
            "create_customer", SCHEMA_HASH, arguments or {"name": "Ada"}, owner="crm-agent",
            thread_id="t-1", domains=["crm"],
        )  # fmt: skip
    return proposal.proposal_id


def test_list_and_show_json(db: str) -> None:
    proposal_id = _propose(db, name="Ada\u202eevil")
    listed = _run("proposals", "list", "--json", "--db", db)
    assert listed.returncode == 0, listed.stderr
    assert [item["proposal_id"] for item in json.loads(listed.stdout)["items"]] == [proposal_id]
    shown = _run("proposals", "show", proposal_id, "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert "\\u202e" in shown.stdout and "\u202e" not in shown.stdout
    assert "propose by crm-agent" in shown.stdout


def test_approve_records_cli_identity(db: str) -> None:
    proposal_id = _propose(db)
    result = _run("proposals", "approve", proposal_id, "--approver", "ops@ci", "--db", db)
    assert result.returncode == 0, result.stderr
    with SQLModelProvider(db) as provider:
        proposal = provider.ledger.get(proposal_id)
    assert proposal.status is ProposalStatus.APPROVED
    assert proposal.approver_id == "ops@ci"
    assert proposal.approver_context is not None and proposal.approver_context.via == "cli"


def test_reject_needs_a_reason_and_conflict_names_the_winner(db: str) -> None:
    proposal_id = _propose(db)
    assert _run("proposals", "reject", proposal_id, "--db", db).returncode != 0
    rejected = _run("proposals", "reject", proposal_id, "--reason", "no", "--approver", "a@h",
                    "--db", db)  # fmt: skip
    assert rejected.returncode == 0, rejected.stderr
    late = _run("proposals", "approve", proposal_id, "--approver", "b@h", "--db", db)
    assert late.returncode == 2
    assert "already rejected (by a@h at" in late.stderr
    cancelled = _run("proposals", "cancel", _propose(db), "--db", db, "--json")
    assert json.loads(cancelled.stdout)["status"] == "cancelled"


def test_traces_export_tail_and_audit_verify(db: str, tmp_path: Path) -> None:
    _propose(db)
    with SQLModelProvider(db) as provider:
        now = provider.ledger.clock.now()
        provider.ledger.append_trace(
            TraceEvent(at=now, agent_id="a", kind="tool_result", tool=f"t{i}") for i in range(30)
        )
    out = tmp_path / "trace.jsonl"
    exported = _run("traces", "export", "--format", "jsonl", "-o", str(out), "--db", db)
    assert exported.returncode == 0, exported.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 30 and json.loads(lines[0])["tool"] == "t0"
    tail = _run("traces", "tail", "-n", "5", "--db", db)
    assert tail.returncode == 0, tail.stderr
    assert [line.split()[5] for line in tail.stdout.splitlines()] == [
        f"t{i}" for i in range(25, 30)
    ]
    verified = _run("audit", "verify", "--db", db)
    assert verified.returncode == 0 and "audit chain ok" in verified.stdout


def test_audit_verify_names_the_first_broken_seq(db: str, tmp_path: Path) -> None:
    _propose(db)
    _propose(db)
    with sqlite3.connect(tmp_path / "ledger.db") as connection:
        connection.execute("UPDATE audit SET actor = 'mallory' WHERE seq = 2")
    result = _run("audit", "verify", "--db", db)
    assert result.returncode == 1
    assert "BROKEN at seq 2" in result.stderr
