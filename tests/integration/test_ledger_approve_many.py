"""``ApprovalLedger.approve_many``: several approvals in one write, each checked and audited as
``approve`` does, each failure reported for its own proposal (both engines)."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.ledger import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ProposalNotFound,
)
from supervisor.ledger.clock import ManualClock
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.repository import LedgerTx, Repository


def _actions(ledger: ApprovalLedger, proposal_id: str) -> list[str]:
    return [record.action for record in ledger.audit_of(proposal_id)]


def test_each_is_approved_or_gets_its_own_error_in_one_write(
    ledger: ApprovalLedger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = ledger.propose("refund", "v1", {"n": 0}, ttl_seconds=5).proposal_id
    clock.advance(10)  # ``short`` is past its expiry
    first, second = (ledger.propose("refund", "v1", {"n": n}).proposal_id for n in (1, 2))
    decided = ledger.propose("refund", "v1", {"n": 3}).proposal_id
    ledger.reject(decided, "op", "no")
    writes: list[bool] = []
    write = Repository.write

    def counted(self: Repository, **options: Any) -> Any:
        writes.append(True)
        return write(self, **options)

    monkeypatch.setattr(Repository, "write", counted)
    outcomes = ledger.approve_many(
        [first, decided, "0" * 32, short, second, first], "op@example.com", "batch"
    )
    assert len(writes) == 1
    assert [type(outcome) for outcome in outcomes] == [
        Proposal, ApprovalAlreadyDecided, ProposalNotFound, ApprovalExpired, Proposal,
        ApprovalAlreadyDecided,
    ]  # fmt: skip
    for proposal_id in (first, second):
        stored = ledger.get(proposal_id)
        assert stored.status is ProposalStatus.APPROVED
        assert stored.approver_id == "op@example.com" and stored.decision_reason == "batch"
        assert _actions(ledger, proposal_id) == ["propose", "approve"]
    assert outcomes[0] == ledger.get(first)
    assert ledger.get(short).status is ProposalStatus.EXPIRED
    assert _actions(ledger, short) == ["propose", "expire"]
    assert ledger.get(decided).status is ProposalStatus.REJECTED
    assert ledger.verify().ok


def test_a_row_changed_outside_the_supervisor_is_reported_and_the_rest_approved(
    ledger: ApprovalLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conditional UPDATE that misses rolls the whole write back (PostgreSQL refuses it on the
    server): each proposal is then approved on its own, so the others still go through once."""
    first, changed, last = (ledger.propose("refund", "v1", {"n": n}).proposal_id
                            for n in range(3))  # fmt: skip
    ledger.cancel(changed, "op", "withdrawn")
    read = LedgerTx.proposal_for_write

    def stale_read(tx: LedgerTx, proposal_id: str, **options: Any) -> Any:
        found = read(tx, proposal_id, **options)
        assert found is not None
        if proposal_id != changed:
            return found
        stale = found[0].model_copy(update={"status": ProposalStatus.PENDING})
        return stale, found[1]

    monkeypatch.setattr(LedgerTx, "proposal_for_write", stale_read)
    outcomes = ledger.approve_many([first, changed, last], "op", "batch")
    assert isinstance(outcomes[0], Proposal) and isinstance(outcomes[2], Proposal)
    assert isinstance(outcomes[1], ApprovalAlreadyDecided)
    assert outcomes[1].status == "cancelled"
    for proposal_id in (first, last):
        assert ledger.get(proposal_id).status is ProposalStatus.APPROVED
        assert _actions(ledger, proposal_id) == ["propose", "approve"]
    assert _actions(ledger, changed) == ["propose", "cancel"]
    assert ledger.verify().ok
