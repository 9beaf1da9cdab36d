"""What the supervisor's inbox reads to follow the change feed, on both engines.

The inbox (``ApprovalsService``) keeps the pending set current from the audit feed. A proposal
is pending only from its creation, so a record that proves it left pending (a decision, a
claim, an expiry, an execution step) removes it without a read, and a record about a proposal
the inbox neither shows nor saw created needs no read either. What must be read (new proposals,
shown ones whose expiry moved) is read in one statement per feed batch, not one per proposal.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

import pytest

from supervisor.ledger.models import ApproverContext, Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.approvals import ApprovalsService
from supervisor.services.identity import ApproverIdentity

CTX = ApproverContext(os_user="alice", host="desk", pid=4242, via="tui")


def propose(ledger: ApprovalLedger, name: str = "Ada") -> Proposal:
    return ledger.propose(
        "create_customer", "schema-v1", {"name": name}, owner="crm-agent", ttl_seconds=3600
    )


class ReadLog:
    """Every id the inbox asks the ledger for, one list per read."""

    def __init__(self, ledger: ApprovalLedger, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads: list[list[str]] = []
        real = ledger.get_many

        def get_many(proposal_ids: Collection[str]) -> dict[str, Proposal]:
            self.reads.append(list(proposal_ids))
            return real(proposal_ids)

        def get(proposal_id: str) -> Proposal:
            raise AssertionError(f"the inbox read {proposal_id} on its own")

        monkeypatch.setattr(ledger, "get_many", get_many)
        monkeypatch.setattr(ledger, "get", get)

    def ids(self) -> set[str]:
        return {proposal_id for read in self.reads if read for proposal_id in read}


@pytest.fixture
def inbox(ledger: ApprovalLedger) -> Iterator[ApprovalsService]:
    context = ApproverContext(os_user="tester", host="testhost", pid=1, via="tui")
    service = ApprovalsService(ledger, ApproverIdentity("tester@testhost#t1", "t1", context))
    service.load()
    yield service


def pending_ids(inbox: ApprovalsService) -> set[str]:
    return {proposal.proposal_id for proposal in inbox.pending()}


def test_get_many_returns_the_proposals_that_exist_by_id(ledger: ApprovalLedger) -> None:
    made = [propose(ledger, f"n{n}") for n in range(3)]
    ledger.approve(made[1].proposal_id, "alice", context=CTX)
    unknown = [f"missing-{n}" for n in range(600)]  # more than one statement's worth of ids
    found = ledger.get_many([*unknown[:300], *(p.proposal_id for p in made), *unknown[300:]])
    assert set(found) == {p.proposal_id for p in made}
    assert found[made[1].proposal_id].status is ProposalStatus.APPROVED
    assert found[made[0].proposal_id] == ledger.get(made[0].proposal_id)
    assert ledger.get_many([]) == {}


def test_a_batch_of_new_proposals_is_read_in_one_statement(
    ledger: ApprovalLedger, inbox: ApprovalsService, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = ReadLog(ledger, monkeypatch)
    made = [propose(ledger, f"n{n}") for n in range(20)]
    change = inbox.poll(0.5)
    assert change is not None
    assert pending_ids(inbox) == {p.proposal_id for p in made}
    assert len(log.reads) == 1 and set(log.reads[0]) == pending_ids(inbox)


def test_decisions_remove_shown_proposals_without_reading_them(
    ledger: ApprovalLedger, inbox: ApprovalsService, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = [propose(ledger, f"n{n}") for n in range(6)]
    inbox.poll(0.5)
    assert pending_ids(inbox) == {p.proposal_id for p in made}
    log = ReadLog(ledger, monkeypatch)
    approved, rejected, cancelled, edited, extended, kept = made
    ledger.approve(approved.proposal_id, "alice", context=CTX)
    ledger.claim(approved.proposal_id, approved.args_hash)
    ledger.reject(rejected.proposal_id, "alice", "no", context=CTX)
    ledger.cancel(cancelled.proposal_id, "alice", context=CTX)
    successor = ledger.edit(edited.proposal_id, {"name": "Ada L."}, "alice", context=CTX)
    longer = ledger.extend(extended.proposal_id, 600, "alice", context=CTX)
    change = inbox.poll(0.5)
    assert change is not None
    gone = [approved, rejected, cancelled, edited]
    assert {p.proposal_id for p in gone} <= set(change.removed)
    assert pending_ids(inbox) == {kept.proposal_id, extended.proposal_id, successor.proposal_id}
    # Read: the edit's new proposal and the one whose expiry moved; never a decided one.
    assert log.ids() == {successor.proposal_id, extended.proposal_id}
    assert len(log.reads) == 1
    shown = {p.proposal_id: p for p in inbox.pending()}
    assert shown[extended.proposal_id].expires_at == longer.expires_at


def test_records_about_proposals_the_inbox_does_not_show_are_not_read(
    ledger: ApprovalLedger, inbox: ApprovalsService, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = propose(ledger)
    ledger.approve(before.proposal_id, "alice", context=CTX)
    inbox.poll(0.5)
    assert pending_ids(inbox) == set()
    log = ReadLog(ledger, monkeypatch)
    ledger.extend(before.proposal_id, 600, "alice", context=CTX)  # approved: extendable
    ledger.claim(before.proposal_id, before.args_hash)
    assert inbox.poll(0.5) is not None
    assert log.ids() == set() and pending_ids(inbox) == set()


def test_a_proposal_made_and_decided_in_one_batch_is_not_shown_or_read(
    ledger: ApprovalLedger, inbox: ApprovalsService, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = ReadLog(ledger, monkeypatch)
    quick = propose(ledger, "quick")
    ledger.approve(quick.proposal_id, "alice", context=CTX)
    slow = propose(ledger, "slow")
    change = inbox.poll(0.5)
    assert change is not None and quick.proposal_id in change.removed
    assert pending_ids(inbox) == {slow.proposal_id}
    assert log.ids() == {slow.proposal_id}


def test_an_inbox_still_loading_reads_what_it_cannot_rule_out(
    ledger: ApprovalLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the pending set is loaded, a shown-or-not test would be wrong: a proposal from a
    page not read yet must still be read when its expiry moves."""
    old = propose(ledger)
    context = ApproverContext(os_user="tester", host="testhost", pid=1, via="tui")
    service = ApprovalsService(ledger, ApproverIdentity("tester@testhost#t1", "t1", context))
    log = ReadLog(ledger, monkeypatch)
    ledger.extend(old.proposal_id, 600, "alice", context=CTX)
    records = ledger.events_since(0)
    change: Any = service._apply_records([r for r in records if r.action == "extend"])
    assert change is not None and log.ids() == {old.proposal_id}
    assert pending_ids(service) == {old.proposal_id}
