"""Grants ("approve and allow similar") on a real ledger, SQLite and PostgreSQL.

A grant allows later calls of the same tool, schema, target and agent whose arguments match its
patterns; it expires on time (a ManualClock), stops at its use cap, dies on a schema change, is
refused for never-grantable tools, and once a revoke commits it allows nothing, even while
another process is proposing calls as fast as it can.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli

from supervisor.ledger.clock import ManualClock
from supervisor.ledger.errors import GrantRefused
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.rules.grants import GrantInvalid
from supervisor.store.engine import create_ledger_engine
from supervisor.store.provider import SQLModelProvider

SCHEMA = "s" * 64
TOOL = "write_file"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def ledger(ledger_url: str, clock: ManualClock) -> Any:
    engine = create_ledger_engine(ledger_url)
    try:
        yield ApprovalLedger(engine, clock=clock)
    finally:
        engine.dispose()


def _write(ledger: ApprovalLedger, path: str, size: int = 10, **kwargs: Any) -> Proposal:
    kwargs.setdefault("owner", "docs-agent")
    kwargs.setdefault("execution_target", {"host": "build-1"})
    schema = kwargs.pop("schema", SCHEMA)
    return ledger.propose(TOOL, schema, {"path": path, "size": size}, **kwargs)


def _granted(ledger: ApprovalLedger, **kwargs: Any) -> Any:
    first = _write(ledger, "/srv/docs/a.md", 10)
    approved, grant = ledger.approve_similar(
        first.proposal_id, "operator", patterns={"path": {"prefix": "/srv/docs"},
                                                 "size": {"range": [0, 100]}},
        reason="docs edits this afternoon", **kwargs,
    )  # fmt: skip
    assert approved.status is ProposalStatus.APPROVED and approved.decided_by_rule is None
    return grant


def test_a_grant_allows_matching_calls_only_and_each_is_a_recorded_decision(
    ledger: ApprovalLedger,
) -> None:
    grant = _granted(ledger)
    allowed = _write(ledger, "/srv/docs/guide/b.md", 99)
    assert allowed.status is ProposalStatus.APPROVED
    assert allowed.decided_by_rule == f"grant:{grant.grant_id}"
    assert allowed.decision_reason == "docs edits this afternoon"
    outside = [
        _write(ledger, "/srv/docs2/b.md"),  # another directory that shares a prefix
        _write(ledger, "/srv/docs/../etc/passwd"),
        _write(ledger, "/srv/docs/b.md", 101),  # out of range
        _write(ledger, "/srv/docs/b.md", owner="other-agent"),
        _write(ledger, "/srv/docs/b.md", execution_target={"host": "prod-1"}),
        ledger.propose(TOOL, SCHEMA, {"path": "/srv/docs/b.md", "size": 1, "mode": "w"},
                       owner="docs-agent", execution_target={"host": "build-1"}),
    ]  # fmt: skip
    assert [p.status for p in outside] == [ProposalStatus.PENDING] * len(outside)
    audit = [r for r in ledger.events_since(0) if r.subject == allowed.proposal_id]
    assert [(r.action, r.actor) for r in audit] == [
        ("propose", "docs-agent"),
        ("approve", f"grant:{grant.grant_id}"),
    ]
    assert audit[1].payload["grant_id"] == grant.grant_id and audit[1].payload["grant_use"] == 1
    claimed = ledger.claim(allowed.proposal_id, allowed.args_hash, "agent:docs-agent")
    assert claimed.proposal_id == allowed.proposal_id
    assert ledger.grant(grant.grant_id).uses == 1


def test_a_grant_expires_on_time(ledger: ApprovalLedger, clock: ManualClock) -> None:
    grant = _granted(ledger, seconds=600)
    clock.advance(599)
    assert _write(ledger, "/srv/docs/b.md").status is ProposalStatus.APPROVED
    clock.advance(1)
    assert _write(ledger, "/srv/docs/c.md").status is ProposalStatus.PENDING
    assert ledger.grant(grant.grant_id).state(clock.now()) == "expired"
    assert ledger.grants(live_only=True) == []


def test_a_grant_stops_at_its_use_cap(ledger: ApprovalLedger) -> None:
    grant = _granted(ledger, max_uses=2)
    statuses = [_write(ledger, f"/srv/docs/{n}.md").status for n in range(4)]
    assert statuses == [ProposalStatus.APPROVED] * 2 + [ProposalStatus.PENDING] * 2
    assert ledger.grant(grant.grant_id).uses == 2


def test_a_grant_dies_when_the_tools_schema_changes(ledger: ApprovalLedger) -> None:
    grant = _granted(ledger)
    changed = _write(ledger, "/srv/docs/b.md", schema="t" * 64)
    assert changed.status is ProposalStatus.PENDING
    dead = ledger.grant(grant.grant_id)
    assert dead.revoked_at is not None and dead.revoke_reason == "the tool's schema changed"
    assert _write(ledger, "/srv/docs/c.md").status is ProposalStatus.PENDING  # old schema too


def test_never_grantable_tools_are_refused_and_nothing_changes(ledger: ApprovalLedger) -> None:
    secret = ledger.propose("read_secret", SCHEMA, {"name": "db"}, grantable=False)
    with pytest.raises(GrantRefused, match="never-grantable"):
        ledger.approve_similar(secret.proposal_id, "operator")
    assert ledger.get(secret.proposal_id).status is ProposalStatus.PENDING
    assert ledger.grants() == []
    grant = _granted(ledger)  # a grant of the tool never allows a call marked never-grantable
    assert _write(ledger, "/srv/docs/b.md", grantable=False).status is ProposalStatus.PENDING
    assert ledger.grant(grant.grant_id).uses == 0


def test_bad_patterns_are_refused_before_anything_is_approved(ledger: ApprovalLedger) -> None:
    first = _write(ledger, "/srv/docs/a.md")
    for patterns in ({"path": {"prefix": "relative/"}}, {"path": {"prefix": "/other/"}},
                     {"size": {"range": [20, 30]}}, {"nope": {"prefix": "/"}},
                     {"path": {"glob": "*"}}):  # fmt: skip
        with pytest.raises(GrantInvalid):
            ledger.approve_similar(first.proposal_id, "operator", patterns=patterns)
    for limits in ({"seconds": 0}, {"seconds": 8 * 86400}, {"max_uses": 0}):
        with pytest.raises(GrantRefused):
            ledger.approve_similar(first.proposal_id, "operator", **limits)  # type: ignore[arg-type]
    assert ledger.get(first.proposal_id).status is ProposalStatus.PENDING
    assert ledger.grants() == []


def test_a_deny_rule_beats_a_grant(ledger: ApprovalLedger) -> None:
    from supervisor.ledger.policy import ApprovalPolicy

    _granted(ledger)
    ledger.apply_policy(ApprovalPolicy.from_toml(
        '[[rules]]\nname = "no secrets"\nverdict = "deny"\nreason = "never"\n'
        'tool = "write_file"\nwhen = "args.path.endsWith(\'.key\')"\n', source="test",
    ))  # fmt: skip
    denied = _write(ledger, "/srv/docs/server.key")
    assert denied.status is ProposalStatus.REJECTED and denied.decided_by_rule == "rule:no secrets"
    assert _write(ledger, "/srv/docs/b.md").decided_by_rule.startswith("grant:")  # type: ignore[union-attr]


def test_a_grant_widened_with_sql_allows_nothing(ledger: ApprovalLedger, ledger_url: str) -> None:
    grant = _granted(ledger)
    engine = create_ledger_engine(ledger_url)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql(
                "UPDATE policy_grant SET arguments_json = "
                '\'{"path":{"prefix":"/"},"size":{"range":[0,100]}}\''
            )
    finally:
        engine.dispose()
    assert _write(ledger, "/etc/passwd").status is ProposalStatus.PENDING
    assert ledger.grant(grant.grant_id).uses == 0


RACER = textwrap.dedent(
    """
    import json, os, sys
    from supervisor.store.provider import SQLModelProvider
    url, out, stop = sys.argv[1], sys.argv[2], sys.argv[3]
    with SQLModelProvider(url) as provider, open(out, "w") as handle:
        ledger = provider.ledger
        after_stop = 0
        for n in range(100_000):
            if os.path.exists(stop):
                after_stop += 1
                if after_stop > 20:
                    break
            p = ledger.propose("write_file", "s" * 64, {"path": f"/srv/docs/{n}.md", "size": 1},
                               owner="docs-agent", execution_target={"host": "build-1"})
            handle.write(json.dumps([p.proposal_id, p.status.value]) + "\\n")
            handle.flush()
    """
)


def test_a_revoked_grant_allows_nothing_after_the_revoke_commits_while_calls_race(
    ledger: ApprovalLedger, ledger_url: str, tmp_path: Path
) -> None:
    grant = _granted(ledger, max_uses=10_000)
    out = tmp_path / "racer.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    stop = tmp_path / "stop"
    racer = subprocess.Popen(
        [sys.executable, "-c", RACER, ledger_url, str(out), str(stop)], env=env
    )
    try:
        while not out.exists() or len(out.read_text().splitlines()) < 20:
            assert racer.poll() is None, "the racing process died"
            time.sleep(0.05)
        revoked = run_cli("grants", "revoke", grant.grant_id, "--reason", "enough",
                          "--db", ledger_url)  # fmt: skip
        assert revoked.returncode == 0, revoked.stderr
    finally:
        stop.touch()
        assert racer.wait(timeout=300) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    seq_of = {}
    revoke_seq = None
    for record in ledger.events_since(0, limit=100_000):
        if record.action == "propose":
            seq_of[record.subject] = record.seq
        if record.action == "grant_revoke":
            revoke_seq = record.seq
    assert revoke_seq is not None
    before = [status for pid, status in rows if seq_of[pid] < revoke_seq]
    after = [status for pid, status in rows if seq_of[pid] > revoke_seq]
    assert before and after, "the revoke did not land while calls were racing"
    assert set(before) == {"approved"}
    assert set(after) == {"pending"}  # nothing the revoked grant allowed after the commit
    assert ledger.grant(grant.grant_id).uses == len(before)


def test_grants_from_the_cli(sqlite_url: str) -> None:
    with SQLModelProvider(sqlite_url) as provider:
        first = _write(provider.ledger, "/srv/docs/a.md")
    made = run_cli("grants", "add", first.proposal_id, "--allow", "path=prefix:/srv/docs/",
                   "--allow", "size=range:0..50", "--minutes", "5", "--uses", "3",
                   "--json", "--db", sqlite_url)  # fmt: skip
    assert made.returncode == 0, made.stderr
    grant = json.loads(made.stdout)
    assert grant["state"] == "active" and grant["max_uses"] == 3
    assert grant["arguments"] == {"path": {"prefix": "/srv/docs/"}, "size": {"range": [0, 50]}}
    listed = run_cli("grants", "list", "--db", sqlite_url)
    assert grant["grant_id"][:12] in listed.stdout and "0/3" in listed.stdout
    bad = run_cli("grants", "add", first.proposal_id, "--allow", "size=range:9", "--db",
                  sqlite_url)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("error [invalid_grant]"), bad.stderr
    gone = run_cli("grants", "revoke", "nope", "--db", sqlite_url)
    assert gone.returncode == 2 and "grant_not_found" in gone.stderr
    assert run_cli("grants", "revoke", grant["grant_id"][:12], "--db", sqlite_url).returncode == 0
    assert "No live grants" in run_cli("grants", "list", "--db", sqlite_url).stdout
    assert "revoked" in run_cli("grants", "list", "--all", "--db", sqlite_url).stdout
    verified = run_cli("audit", "verify", "--db", sqlite_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr
