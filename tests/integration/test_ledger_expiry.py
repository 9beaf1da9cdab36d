"""Expiry is enforced at claim time and by the sweep, with time from an injected clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from supervisor.ledger import ApprovalAlreadyDecided, ApprovalExpired, ManualClock, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.store import expiry


def test_approved_but_expired_cannot_be_claimed(ledger: ApprovalLedger, clock: ManualClock) -> None:
    proposal = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=60)
    ledger.approve(proposal.proposal_id, "alice")
    clock.advance(60)
    with pytest.raises(ApprovalExpired) as caught:
        ledger.claim(proposal.proposal_id, proposal.args_hash)
    assert caught.value.expires_at == proposal.expires_at
    assert caught.value.code == "approval_expired"
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.EXPIRED
    with pytest.raises(ApprovalExpired):
        ledger.claim(proposal.proposal_id, proposal.args_hash)
    assert [e.action for e in ledger.events_since(0)][-1] == "expire"


def test_claim_just_before_expiry_succeeds(ledger: ApprovalLedger, clock: ManualClock) -> None:
    proposal = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=60)
    ledger.approve(proposal.proposal_id, "alice")
    clock.advance(59.999)
    assert ledger.claim(proposal.proposal_id, proposal.args_hash).state == "executing"
    clock.advance(3600)
    assert ledger.expire_due() == []  # consumed proposals never expire
    assert ledger.complete(proposal.proposal_id).state == "executed"


def test_sweep_expires_pending_and_approved_only(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    pending = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=10)
    approved = ledger.approve(
        ledger.propose("tool", "s", {"a": 2}, ttl_seconds=10).proposal_id, "a"
    )
    later = ledger.propose("tool", "s", {"a": 3}, ttl_seconds=100)
    rejected = ledger.reject(ledger.propose("tool", "s", {"a": 4}, ttl_seconds=10).proposal_id, "a")
    assert ledger.expire_due() == []
    clock.advance(10)
    assert sorted(ledger.expire_due()) == sorted([pending.proposal_id, approved.proposal_id])
    assert ledger.get(pending.proposal_id).status is ProposalStatus.EXPIRED
    assert ledger.get(approved.proposal_id).status is ProposalStatus.EXPIRED
    assert ledger.get(later.proposal_id).status is ProposalStatus.PENDING
    assert ledger.get(rejected.proposal_id).status is ProposalStatus.REJECTED
    assert ledger.expire_due() == []
    expired_events = [e for e in ledger.events_since(0) if e.action == "expire"]
    assert {e.subject for e in expired_events} == {pending.proposal_id, approved.proposal_id}
    assert ledger.verify().ok


def test_pending_past_expiry_cannot_be_approved(ledger: ApprovalLedger, clock: ManualClock) -> None:
    proposal = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=10)
    clock.advance(11)
    with pytest.raises(ApprovalExpired):
        ledger.approve(proposal.proposal_id, "alice")
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.EXPIRED
    with pytest.raises(ApprovalExpired):
        ledger.edit(proposal.proposal_id, {"a": 2}, "alice")


def test_extend_keeps_a_proposal_alive_and_is_audited(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    proposal = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=60)
    ledger.approve(proposal.proposal_id, "alice")
    clock.advance(50)
    extended = ledger.extend(proposal.proposal_id, 600, "alice", "waiting for a window")
    assert extended.expires_at == proposal.expires_at + timedelta(seconds=600)
    assert extended.status is ProposalStatus.APPROVED
    event = ledger.events_since(0)[-1]
    assert (event.action, event.actor, event.payload["reason"]) == (
        "extend", "alice", "waiting for a window",
    )  # fmt: skip
    assert event.payload["old_expires_at"] == proposal.expires_at.isoformat()
    clock.advance(60)
    assert ledger.expire_due() == []
    assert ledger.claim(proposal.proposal_id, proposal.args_hash).state == "executing"


def test_expired_is_never_revived(ledger: ApprovalLedger, clock: ManualClock) -> None:
    proposal = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=10)
    clock.advance(10)
    with pytest.raises(ApprovalExpired):
        ledger.extend(proposal.proposal_id, 100, "alice")
    with pytest.raises(ApprovalExpired):
        ledger.extend(proposal.proposal_id, 100, "alice")
    with pytest.raises((ApprovalExpired, ApprovalAlreadyDecided)):
        ledger.approve(proposal.proposal_id, "alice")


def test_a_sweep_of_many_writes_one_record_per_proposal_in_order_with_what_it_was(
    ledger: ApprovalLedger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep expires a batch with one UPDATE per chunk of ids (7 here, so several) and
    appends the batch's records together: each record still names its proposal and the status
    it left, in expiry order, chained."""
    monkeypatch.setattr(expiry, "_EXPIRE_CHUNK", 7)
    proposals = [ledger.propose("tool", "s", {"n": n}, ttl_seconds=10 + n) for n in range(40)]
    approved = {p.proposal_id for p in proposals[::3]}
    for proposal_id in approved:
        ledger.approve(proposal_id, "alice")
    ledger.reject(proposals[1].proposal_id, "alice")
    head = ledger.head()
    clock.advance(100)
    expired = ledger.expire_due(limit=25)
    due = [p.proposal_id for p in proposals if p.proposal_id != proposals[1].proposal_id]
    assert expired == due[:25]  # oldest expiry first, at most the limit
    records = ledger.events_since(head)
    assert [r.seq for r in records] == list(range(head + 1, head + 26))
    assert [(r.action, r.subject) for r in records] == [("expire", i) for i in due[:25]]
    by_id = {p.proposal_id: p for p in proposals}
    for record in records:
        was = "approved" if record.subject in approved else "pending"
        assert record.payload == {
            "from": was, "to": "expired",
            "expires_at": by_id[record.subject].expires_at.isoformat(),
        }  # fmt: skip
    assert ledger.expire_due(limit=1000) == due[25:]
    assert ledger.expire_due() == []
    assert {ledger.get(i).status for i in due} == {ProposalStatus.EXPIRED}
    assert ledger.get(proposals[1].proposal_id).status is ProposalStatus.REJECTED
    assert ledger.verify().ok
