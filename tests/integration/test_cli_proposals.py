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


def test_edit_supersedes_prints_the_diff_and_refuses_bad_edits(db: str) -> None:
    from supervisor.ledger.models import ToolRecord

    proposal_id = _propose(db, name="Ada", email="ada@example.com")
    edited = _run(
        "proposals", "edit", proposal_id, "--set", "email=ada@lovelace.example",
        "--reason", "typo", "--approver", "ops@ci", "--db", db,
    )  # fmt: skip
    assert edited.returncode == 0, edited.stderr
    first, diff = edited.stdout.splitlines()
    assert first.startswith(f"superseded {proposal_id} by ") and first.endswith("by ops@ci")
    assert diff == '  $.email: "ada@example.com" -> "ada@lovelace.example"'
    new_id = first.split()[3]
    with SQLModelProvider(db) as provider:
        old, new = provider.ledger.get(proposal_id), provider.ledger.get(new_id)
        assert old.status is ProposalStatus.SUPERSEDED and old.superseded_by_id == new_id
        assert new.arguments == {"name": "Ada", "email": "ada@lovelace.example"}
        assert new.approver_context is None and old.approver_context is not None
        assert old.approver_context.via == "cli"
        provider.ledger.upsert_tool(
            ToolRecord(
                handle="crm:create_customer", agent_id="crm-agent", name="create_customer",
                schema_hash=SCHEMA_HASH, json_schema={
                    "name": "create_customer", "description": "Create one CRM customer.",
                    "parameters": {"type": "object", "properties": {"email": {"type": "string"}}},
                },
            )
        )  # fmt: skip
    for args, code in [
        (("--set", "email=42"), "invalid_edit"),  # the registry's schema refuses it
        (("--set", "_secret=1"), "invalid_edit"),  # a reserved name
        (("--args", "[1]"), "invalid_edit_arguments"),
        (("--args", "{nope"), "invalid_edit_arguments"),
        (("--set", "no-equals-sign"), "invalid_edit_arguments"),
        ((), "invalid_edit_arguments"),
    ]:
        refused = _run("proposals", "edit", new_id, *args, "--db", db)
        assert refused.returncode == 2, (args, refused.stdout)
        assert refused.stderr.startswith(f"error [{code}]"), (args, refused.stderr)
    with SQLModelProvider(db) as provider:
        assert provider.ledger.get(new_id).status is ProposalStatus.PENDING
