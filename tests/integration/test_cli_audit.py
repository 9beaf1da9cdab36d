"""``supervisor audit head|verify`` as a real console script against a SQLite ledger file.

Exit codes: 0 ok, 1 verification failed, 2 usage or ledger errors.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.cli import SUPERVISOR

from supervisor.canonical import canonical_json
from supervisor.ledger.audit import chain_hash
from supervisor.store.provider import SQLModelProvider


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    assert SUPERVISOR is not None, "the console script is not installed"
    return subprocess.run([SUPERVISOR, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def db(path: Path) -> str:
    with SQLModelProvider(f"sqlite:///{path}") as provider:
        ledger = provider.ledger
        for index in range(2):
            proposal = ledger.propose("transfer", "s", {"n": index}, owner="agent")
            ledger.approve(proposal.proposal_id, "bob")
            ledger.claim(proposal.proposal_id, proposal.args_hash, "worker")
            ledger.complete(proposal.proposal_id)
    return str(path)


def _head(db: str) -> dict[str, object]:
    result = _run("audit", "head", "--json", "--db", db)
    assert result.returncode == 0, result.stderr
    head: dict[str, object] = json.loads(result.stdout)
    return head


def test_head_prints_the_anchor_that_verify_accepts(db: str) -> None:
    head = _head(db)
    assert head["seq"] == 8 and head["anchor"] == f"8:{head['hash']}"
    plain = _run("audit", "head", "--db", db)
    assert plain.returncode == 0 and f"head seq 8 hash {head['hash']}" in plain.stdout
    for anchor in (str(head["anchor"]), str(head["hash"])):
        verified = _run("audit", "verify", "--anchor", anchor, "--db", db)
        assert verified.returncode == 0, verified.stderr
        assert "audit chain ok: 8 records" in verified.stdout
        assert "ledger rows ok: 2 proposals" in verified.stdout
        assert "anchor ok: seq 8" in verified.stdout


def test_a_rehashed_chain_fails_its_anchor(db: str, path: Path) -> None:
    head = _head(db)
    with sqlite3.connect(path) as connection:  # rewrite the whole chain consistently
        rows = connection.execute(
            "SELECT seq, at, actor, action, subject, payload_json FROM audit ORDER BY seq"
        ).fetchall()
        prev = "0" * 64
        for seq, at, actor, action, subject, payload_json in rows:
            digest = chain_hash(
                seq=seq, at=datetime.fromisoformat(at).replace(tzinfo=UTC),
                actor="mallory" if seq == 2 else actor, action=action, subject=subject,
                payload=json.loads(payload_json), prev_hash=prev,
            )  # fmt: skip
            connection.execute(
                "UPDATE audit SET actor = CASE WHEN seq = 2 THEN 'mallory' ELSE actor END, "
                "prev_hash = ?, hash = ? WHERE seq = ?",
                (prev, digest, seq),
            )
            prev = digest
    connection.close()
    assert _run("audit", "verify", "--db", db).returncode == 0  # only the anchor can tell
    failed = _run("audit", "verify", "--anchor", str(head["anchor"]), "--json", "--db", db)
    assert failed.returncode == 1
    report = json.loads(failed.stdout)
    assert report["ok"] is False and report["chain_ok"] is True
    assert report["anchor"]["ok"] is False and "no longer holds" in report["anchor"]["reason"]
    human = _run("audit", "verify", "--anchor", str(head["hash"]), "--db", db)
    assert human.returncode == 1 and "anchor FAILED" in human.stderr


def test_an_emptied_audit_table_fails_and_findings_are_escaped(db: str, path: Path) -> None:
    hostile_id = "evil\x1b]0;pwned\x07\u202e"
    with sqlite3.connect(path) as connection:
        connection.execute("DELETE FROM audit")
        connection.execute(
            "INSERT INTO proposal (id, tool_name, tool_schema_hash, arguments_json, args_hash, "
            "target_json, policy_reason, owner, domains_json, status, created_at, updated_at, "
            "expires_at) VALUES (?, 't', 's', ?, ?, '{}', '', '', '[]', 'approved', "
            "'2030-01-01 00:00:00.000000', '2030-01-01 00:00:00.000000', "
            "'2031-01-01 00:00:00.000000')",
            (hostile_id, canonical_json({}), "0" * 64),
        )
    connection.close()
    human = _run("audit", "verify", "--db", db)
    assert human.returncode == 1
    assert "holds proposals but no audit records" in human.stderr
    assert "\x1b" not in human.stderr and "\u202e" not in human.stderr
    assert "evil\\u001b]0;pwned\\u0007\\u202e" in human.stderr
    bounded = _run("audit", "verify", "--json", "--limit", "1", "--db", db)
    assert bounded.returncode == 1
    assert "\x1b" not in bounded.stdout and "\u202e" not in bounded.stdout
    report = json.loads(bounded.stdout)
    assert report["proposals_checked"] == 3 and report["mismatch_count"] == 4
    assert len(report["mismatches"]) == 1


@pytest.mark.parametrize("anchor", ["nothex", "12:" + "z" * 64, ""])
def test_a_malformed_anchor_is_a_usage_error(db: str, anchor: str) -> None:
    result = _run("audit", "verify", "--anchor", anchor, "--db", db)
    assert result.returncode == 2
    assert result.stderr.startswith("error [invalid_anchor]")
    assert "Traceback" not in result.stderr
