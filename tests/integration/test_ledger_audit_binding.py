"""Ledger rows are bound to the audit chain: direct SQL writes neither run nor verify.

Each attack is what any process that can write the ledger (the shared SQLite file, or the
PostgreSQL role) can do with plain SQL: it writes through its own engine and ``text()``, never
through the ledger's code. The claim must refuse (``audit_mismatch``, audited, nothing runs) and
``verify`` must name the row; honest ledgers, with every transition the code writes, still
verify and claim.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from support.tamper import checks, refused_claim, sql, timestamp

from supervisor.canonical import args_hash, canonical_json
from supervisor.ledger import (
    ApprovalExpired,
    ArgumentsMismatch,
    ManualClock,
    ProposalStatus,
)
from supervisor.ledger.audit import GENESIS_HASH, chain_hash
from supervisor.ledger.errors import InvalidAnchor
from supervisor.ledger.service import ApprovalLedger
from supervisor.ledger.verify import Anchor, LedgerReport

TRANSFER = {"amount": 10, "to": "alice"}
FORGED = {"amount": 10_000, "to": "mallory"}


@pytest.fixture
def attacker(ledger_url: str, ledger: ApprovalLedger) -> Iterator[Engine]:
    """A plain SQLAlchemy engine on the same database: no ledger code, just SQL."""
    engine = sa.create_engine(ledger_url)
    try:
        yield engine
    finally:
        engine.dispose()


def _approved(ledger: ApprovalLedger, **options: Any) -> Any:
    proposal = ledger.propose("transfer", "schema", TRANSFER, owner="agent", **options)
    ledger.approve(proposal.proposal_id, "bob", "fine")
    return proposal


# the direct-SQL attacks ---------------------------------------------------------------------


def test_a_consistent_rewrite_of_arguments_and_hash_never_runs(
    ledger: ApprovalLedger, attacker: Engine
) -> None:
    proposal = _approved(ledger)
    forged_hash = args_hash("transfer", "schema", FORGED, {})
    sql(
        attacker, "UPDATE proposal SET arguments_json = :a, args_hash = :h WHERE id = :id",
        a=canonical_json(FORGED), h=forged_hash, id=proposal.proposal_id,
    )  # fmt: skip
    # The resumer hashes what it is about to run, i.e. the forged call: every hash agrees.
    error = refused_claim(ledger, proposal.proposal_id, forged_hash)
    assert "args hash" in error.detail
    report = ledger.verify()
    assert report.chain_ok and not report.ok
    assert checks(report, proposal.proposal_id) == {"args_hash"}


def test_a_status_flipped_to_approved_without_an_approve_record_never_runs(
    ledger: ApprovalLedger, attacker: Engine
) -> None:
    pending = ledger.propose("transfer", "schema", TRANSFER)
    rejected = ledger.propose("transfer", "schema", {**TRANSFER, "n": 2})
    ledger.reject(rejected.proposal_id, "bob", "no")
    sql(attacker, "UPDATE proposal SET status = 'approved', approver_id = 'bob'")
    for proposal, audited in ((pending, "pending"), (rejected, "rejected")):
        error = refused_claim(ledger, proposal.proposal_id, proposal.args_hash)
        assert audited in error.detail
    report = ledger.verify()
    assert not report.ok
    status = [(f.proposal_id, f.chain, f.row) for f in report.mismatches if f.check == "status"]
    assert sorted(status) == sorted(
        [(pending.proposal_id, "pending", "approved"), (rejected.proposal_id, "rejected",
                                                          "approved")]
    )  # fmt: skip
    assert checks(report, pending.proposal_id) == {"status", "approver"}


def test_an_executed_proposal_set_back_to_approved_never_runs_again(
    ledger: ApprovalLedger, attacker: Engine
) -> None:
    proposal = _approved(ledger)
    ledger.claim(proposal.proposal_id, proposal.args_hash, "worker")
    ledger.complete(proposal.proposal_id, "success")
    sql(attacker, "DELETE FROM execution WHERE proposal_id = :id", id=proposal.proposal_id)
    sql(attacker, "UPDATE proposal SET status = 'approved' WHERE id = :id",
         id=proposal.proposal_id)  # fmt: skip
    error = refused_claim(ledger, proposal.proposal_id, proposal.args_hash)
    assert "claim" in error.detail
    report = ledger.verify()
    assert checks(report, proposal.proposal_id) == {"status", "execution"}


def test_an_expired_approval_moved_forward_never_runs(
    ledger: ApprovalLedger, attacker: Engine, clock: ManualClock
) -> None:
    swept = _approved(ledger, ttl_seconds=60)
    clock.advance(1)
    unswept = ledger.propose("transfer", "schema", {**TRANSFER, "n": 2}, ttl_seconds=60)
    ledger.approve(unswept.proposal_id, "bob")
    clock.advance(59.5)
    assert ledger.expire_due() == [swept.proposal_id]
    clock.advance(1)  # the second approval has expired too, but nobody swept it
    later = timestamp(attacker, clock.now() + timedelta(days=1))
    sql(attacker, "UPDATE proposal SET status = 'approved', expires_at = :later", later=later)
    assert ledger.get(unswept.proposal_id).expires_at > clock.now()
    for proposal in (swept, unswept):
        refused_claim(ledger, proposal.proposal_id, proposal.args_hash)
    report = ledger.verify()
    assert checks(report, swept.proposal_id) == {"status", "expires_at"}
    assert checks(report, unswept.proposal_id) == {"expires_at"}


def test_an_approve_record_inserted_with_a_made_up_hash_breaks_the_chain(
    ledger: ApprovalLedger, attacker: Engine, clock: ManualClock
) -> None:
    proposal = ledger.propose("transfer", "schema", TRANSFER)
    tip = ledger.chain_head()
    payload: dict[str, Any] = {"from": "pending", "to": "approved",
                               "args_hash": proposal.args_hash, "approver_id": "bob",
                               "reason": None, "context": {}}  # fmt: skip
    sql(
        attacker,
        "INSERT INTO audit (seq, at, actor, action, subject, payload_json, prev_hash, hash) "
        "VALUES (:seq, :at, 'bob', 'approve', :id, :p, :prev, :h)",
        seq=tip.seq + 1, at=timestamp(attacker, clock.now()), id=proposal.proposal_id,
        p=canonical_json(payload), prev=tip.hash, h="e" * 64,
    )  # fmt: skip
    sql(attacker, "UPDATE proposal SET status = 'approved', approver_id = 'bob'")
    report = ledger.verify()
    assert (report.ok, report.chain_ok, report.first_broken_seq) == (False, False, tip.seq + 1)


def test_a_payload_that_is_not_json_is_named_not_a_crash(
    ledger: ApprovalLedger, attacker: Engine
) -> None:
    proposal = _approved(ledger)
    sql(attacker, "UPDATE audit SET payload_json = '[1' WHERE action = 'approve'")
    assert [r.payload for r in ledger.events_since(0)][1] == {}
    error = refused_claim(ledger, proposal.proposal_id, proposal.args_hash)
    assert "different args hash" in error.detail
    report = ledger.verify()
    assert (report.chain_ok, report.first_broken_seq) == (False, 2)


# a rewritten, truncated or emptied chain ---------------------------------------------------


def _rehash_from(attacker: Engine, ledger: ApprovalLedger, seq: int, **changes: Any) -> None:
    """Edit record ``seq`` and re-hash it and every later record: a consistent rewrite."""
    records = ledger.events_since(0, limit=10_000)
    prev = GENESIS_HASH
    for record in records:
        fields = record.model_dump(exclude={"hash", "prev_hash", "payload"})
        payload = record.payload
        if record.seq == seq:
            fields.update(changes)
        if record.seq >= seq:
            digest = chain_hash(**fields, payload=payload, prev_hash=prev)
            sql(
                attacker,
                "UPDATE audit SET actor = :actor, prev_hash = :prev, hash = :h WHERE seq = :seq",
                actor=fields["actor"], prev=prev, h=digest, seq=record.seq,
            )  # fmt: skip
            prev = digest
        else:
            prev = record.hash


def test_a_rehashed_chain_verifies_but_fails_its_anchor(
    ledger: ApprovalLedger, attacker: Engine
) -> None:
    proposal = _approved(ledger)
    ledger.claim(proposal.proposal_id, proposal.args_hash, "worker")
    ledger.complete(proposal.proposal_id)
    anchor = ledger.chain_head()
    assert ledger.verify(anchor.anchor).ok and ledger.verify(anchor.hash).ok
    _rehash_from(attacker, ledger, 2, actor="mallory")
    assert ledger.verify().ok  # a consistent rewrite: only the anchor can tell
    for form in (anchor.anchor, anchor.hash, Anchor(hash=anchor.hash, seq=anchor.seq)):
        report = ledger.verify(form)
        assert not report.ok and report.anchor is not None and not report.anchor.ok
        assert "no longer holds" in (report.reason or "")


def test_a_truncated_chain_fails_its_anchor(ledger: ApprovalLedger, attacker: Engine) -> None:
    proposal = _approved(ledger)
    with pytest.raises(ArgumentsMismatch):  # a caller's own mismatch: the row is untouched
        ledger.claim(proposal.proposal_id, "0" * 64, "worker")
    anchor = ledger.chain_head()
    sql(attacker, "DELETE FROM audit WHERE seq = :seq", seq=anchor.seq)
    assert ledger.verify().ok  # the prefix is intact and explains every row
    report = ledger.verify(anchor.anchor)
    assert not report.ok and report.anchor is not None
    assert f"ends at seq {anchor.seq - 1}" in (report.anchor.reason or "")


def test_an_emptied_audit_table_fails_verify_and_every_claim(
    ledger: ApprovalLedger, attacker: Engine
) -> None:
    proposals = [_approved(ledger) for _ in range(3)]
    sql(attacker, "DELETE FROM audit")
    report = ledger.verify()
    assert report.chain_ok and not report.ok
    assert report.mismatch_count == 3 and report.proposals_checked == 3
    assert {f.check for f in report.mismatches} == {"audit"}
    assert "no audit records" in (report.reason or "")
    error = refused_claim(ledger, proposals[0].proposal_id, proposals[0].args_hash)
    assert "no propose record" in error.detail


def test_the_report_is_bounded_and_counts_everything(
    ledger: ApprovalLedger, attacker: Engine
) -> None:
    for index in range(12):
        ledger.propose("transfer", "schema", {"n": index})
    sql(attacker, "DELETE FROM audit")
    report = ledger.verify(max_findings=5)
    assert report.mismatch_count == 12 and len(report.mismatches) == 5
    assert LedgerReport.model_validate_json(report.model_dump_json()) == report


def test_a_deleted_row_is_reported(ledger: ApprovalLedger, attacker: Engine) -> None:
    kept = ledger.propose("transfer", "schema", TRANSFER)
    gone = ledger.propose("transfer", "schema", FORGED)
    sql(attacker, "DELETE FROM proposal_domain")
    sql(attacker, "DELETE FROM proposal WHERE id = :id", id=gone.proposal_id)
    report = ledger.verify()
    assert [(f.proposal_id, f.check) for f in report.mismatches] == [(gone.proposal_id, "row")]
    assert checks(report, kept.proposal_id) == set()


# honest ledgers ---------------------------------------------------------------------------


def test_every_honest_transition_verifies_and_claims(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    extended = ledger.propose("t", "s", {"case": "extended"}, ttl_seconds=60)
    ledger.extend(extended.proposal_id, 120, "bob")
    ledger.approve(extended.proposal_id, "bob")
    ledger.extend(extended.proposal_id, 60, "bob")
    clock.advance(90)  # past the proposed expiry, within the extended one
    ledger.claim(extended.proposal_id, extended.args_hash, "w")
    ledger.complete(extended.proposal_id)

    edited = ledger.propose("t", "s", {"case": "edit", "to": "a"})
    successor = ledger.edit(edited.proposal_id, {"case": "edit", "to": "b"}, "bob")
    ledger.approve(successor.proposal_id, "carol")
    ledger.claim(successor.proposal_id, successor.args_hash, "w")
    ledger.fail(successor.proposal_id, "error", "boom")

    ledger.reject(ledger.propose("t", "s", {"case": "reject"}).proposal_id, "bob")
    ledger.cancel(ledger.propose("t", "s", {"case": "cancel"}).proposal_id, "agent")
    revoked = _approved(ledger)
    ledger.revoke(revoked.proposal_id, "bob")

    expiring = ledger.propose("t", "s", {"case": "expire-approved"}, ttl_seconds=5)
    ledger.approve(expiring.proposal_id, "bob")
    ledger.propose("t", "s", {"case": "expire-pending"}, ttl_seconds=5)
    refused = ledger.propose("t", "s", {"case": "refused-then-claimed"})
    ledger.approve(refused.proposal_id, "bob")
    with pytest.raises(ArgumentsMismatch):
        ledger.claim(refused.proposal_id, "0" * 64, "w")
    ledger.claim(refused.proposal_id, refused.args_hash, "w")
    ledger.complete(refused.proposal_id)
    clock.advance(10)
    with pytest.raises(ApprovalExpired):
        ledger.claim(expiring.proposal_id, expiring.args_hash, "w")
    ledger.expire_due()

    crashed = _approved(ledger, ttl_seconds=3600)
    ledger.claim(crashed.proposal_id, crashed.args_hash, "w")
    ledger.recover(is_alive=lambda pid, host: False)
    ledger.reconcile(crashed.proposal_id, "executed", "bob", "checked the bank")
    stuck = _approved(ledger, ttl_seconds=3600)
    ledger.claim(stuck.proposal_id, stuck.args_hash, "w")
    ledger.recover(is_alive=lambda pid, host: False)

    with ledger.repository.write() as tx:  # a record about something that is not a proposal
        tx.append_audit(at=clock.now(), actor="ops", action="policy_set", subject="policy:1",
                        payload={"version": 1})  # fmt: skip
    statuses = {p.status for p in ledger.list(limit=100).items}
    assert statuses >= {
        ProposalStatus.EXECUTED, ProposalStatus.FAILED, ProposalStatus.SUPERSEDED,
        ProposalStatus.REJECTED, ProposalStatus.CANCELLED, ProposalStatus.EXPIRED,
        ProposalStatus.NEEDS_RECONCILIATION,
    }  # fmt: skip
    report = ledger.verify(ledger.chain_head().anchor)
    assert report.ok, report.mismatches
    assert report.proposals_checked == 11 and report.mismatch_count == 0

    clock.advance(40 * 86400)
    purged = ledger.purge(older_than_days=30)
    assert purged.purged == 10
    assert ledger.verify().ok


def test_the_anchor_must_be_a_hash(ledger: ApprovalLedger) -> None:
    for text in ("", "abc", "12:" + "g" * 64, "x:" + "a" * 64, "1:2:" + "a" * 63):
        with pytest.raises(InvalidAnchor) as caught:
            ledger.verify(text)
        assert caught.value.code == "invalid_anchor"
    empty = ledger.chain_head()
    assert (empty.seq, empty.hash) == (0, GENESIS_HASH)
    assert ledger.verify(empty.anchor).ok


# end to end: an agent resumed from a consistently rewritten proposal and checkpoint ---------


def test_a_resumed_agent_never_runs_a_consistently_rewritten_call(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.agents import ADA, approved_create_customer, side_effects

    from supervisor import SQLModelProvider
    from supervisor.testing import CallTools, ScriptedModel, ToolCall

    monkeypatch.setenv("SIDE_EFFECT_FILE", str(tmp_path / "side_effects.log"))
    with (
        SQLModelProvider(sqlite_url) as provider,
        ScriptedModel([CallTools([ToolCall("create_customer", ADA)])]) as model,
    ):
        agent, proposal = approved_create_customer(provider, model, "bound-agent")
        # The attacker rewrites the arguments, their hash and the checkpointed call to agree.
        forged = {"name": "Ada", "email": "mallory@evil.example"}
        forged_hash = args_hash("create_customer", proposal.tool_schema_hash, forged, {})
        database = sqlite_url.removeprefix("sqlite:///")
        with sqlite3.connect(database) as connection:
            connection.execute(
                "UPDATE proposal SET arguments_json = ?, args_hash = ? WHERE id = ?",
                (canonical_json(forged), forged_hash, proposal.proposal_id),
            )
            (calls_json,) = connection.execute(
                "SELECT pending_tool_calls_json FROM checkpoint WHERE id = ?",
                (proposal.checkpoint_id,),
            ).fetchone()
            calls = json.loads(calls_json)
            calls[0]["arguments"] = json.dumps(forged)
            connection.execute(
                "UPDATE checkpoint SET pending_tool_calls_json = ? WHERE id = ?",
                (json.dumps(calls), proposal.checkpoint_id),
            )
        connection.close()
        resumed = agent.resume_approval(proposal.proposal_id)
        assert not resumed.consumed
        assert resumed.error_code == "audit_mismatch"
        assert not provider.ledger.verify().ok
    assert side_effects() == []
