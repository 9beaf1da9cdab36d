"""Following an edit chain (``supervisor.ledger.chain``) on a real ledger, both engines."""

from __future__ import annotations

from supervisor.ledger.chain import compact_diff, earlier_links, edit_note, live_end
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger


class _Forged:
    """A reader that returns one forged row in place of the ledger's (a row written outside
    the supervisor)."""

    def __init__(self, ledger: ApprovalLedger, forged: Proposal) -> None:
        self.ledger, self.forged = ledger, forged

    def get(self, proposal_id: str) -> Proposal:
        if proposal_id == self.forged.proposal_id:
            return self.forged
        return self.ledger.get(proposal_id)


def test_the_live_end_of_two_edits_and_the_links_back(ledger: ApprovalLedger) -> None:
    first = ledger.propose("create_customer", "s", {"name": "Ada", "email": "a@x"}, ttl_seconds=60)
    assert live_end(ledger, first.proposal_id) == first  # never edited: its own end
    second = ledger.edit(first.proposal_id, {"name": "Ada", "email": "b@x"}, "alice")
    third = ledger.edit(second.proposal_id, {"name": "Augusta", "email": "c@x"}, "alice")
    for start in (first, second, third):
        assert live_end(ledger, start.proposal_id).proposal_id == third.proposal_id
    ledger.reject(third.proposal_id, "alice", "no")
    end = live_end(ledger, first.proposal_id)
    assert (end.proposal_id, end.status) == (third.proposal_id, ProposalStatus.REJECTED)
    assert [p.proposal_id for p in earlier_links(ledger, third)] == [
        first.proposal_id, second.proposal_id,
    ]  # fmt: skip
    assert earlier_links(ledger, first) == []
    # Each edit kept the TTL the first was proposed with.
    assert {p.expires_at - p.created_at for p in (first, second, third)} == {
        first.expires_at - first.created_at
    }


def test_a_one_way_link_is_not_followed(ledger: ApprovalLedger) -> None:
    first = ledger.propose("create_customer", "s", {"name": "Ada"}, ttl_seconds=60)
    other = ledger.propose("create_customer", "s", {"name": "Mallory"}, ttl_seconds=60)
    ledger.approve(other.proposal_id, "alice")
    # A superseded row pointing at an approved proposal that never superseded it.
    forged = first.model_copy(
        update={"status": ProposalStatus.SUPERSEDED, "superseded_by_id": other.proposal_id}
    )
    reader = _Forged(ledger, forged)
    assert live_end(reader, first.proposal_id) == forged  # "superseded": nothing runs
    # And a proposal claiming to supersede one that does not point back has no earlier links.
    claims = ledger.get(other.proposal_id).model_copy(update={"supersedes_id": first.proposal_id})
    assert earlier_links(ledger, claims) == []


def test_the_note_names_each_changed_path_old_and_new() -> None:
    proposed = {"name": "Ada", "email": "a@x", "tags": ["x"]}
    ran_with = {"name": "Ada", "email": "b@x", "note": "vip"}
    assert compact_diff(proposed, ran_with) == [
        {"path": "$.email", "old": "a@x", "new": "b@x"},
        {"path": "$.note", "new": "vip"},
        {"path": "$.tags", "old": ["x"]},
    ]
    note = edit_note(proposed, ran_with, edits=2)
    assert (note["edits"], note["arguments"]) == (2, ran_with)
    assert "edited" in note["message"]
