"""Following a proposal's edit chain: which proposal now stands for a call, and what changed.

An edit supersedes a pending proposal with a new one (``superseded_by_id`` forward,
``supersedes_id`` back). Whoever waits on or resumes a call follows the chain forward to its
live end and acts on that proposal: approved means "run *its* arguments", never the
original's; rejected, cancelled or expired means the call does not run. Every process that acts
on a proposal (the agent runtime, ``supervisor run``, the demo agents, the MCP tools through the
runtime, the browser gate) reads the chain through these functions, so they agree.

What the model is told about an edit is :func:`edit_note`: a JSON object (never markup) naming
the change as made by a human, with a compact diff of the changed paths, old -> new.
"""

from __future__ import annotations

from typing import Any, Protocol

from supervisor.ledger.errors import ProposalNotFound
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.ledger.policy import diff_arguments

#: At most this many proposals are followed (an edit chain longer than this is not a human's).
MAX_CHAIN = 1_000

EDIT_MESSAGE = (
    "A human reviewer edited this call's arguments before approving it; it ran with the "
    "edited arguments, not the ones you proposed."
)


class ProposalReader(Protocol):
    """What the chain needs of a ledger: one proposal by id (``ApprovalLedger.get``)."""

    def get(self, proposal_id: str) -> Proposal:
        """The proposal; raises ``ProposalNotFound`` when there is none."""
        ...


def live_end(ledger: ProposalReader, proposal_id: str) -> Proposal:
    """The proposal that now stands for ``proposal_id``'s call: its edit chain's last link.

    A proposal that was never edited is its own live end. A superseded proposal whose
    successor cannot be read (purged) is returned as it is: it is then the honest answer
    ("superseded") and nothing runs.

    Raises:
        ProposalNotFound: ``proposal_id`` itself is not in the ledger.
    """
    proposal = ledger.get(proposal_id)
    seen = {proposal.proposal_id}
    while proposal.status is ProposalStatus.SUPERSEDED and proposal.superseded_by_id:
        if proposal.superseded_by_id in seen or len(seen) >= MAX_CHAIN:
            return proposal
        try:
            successor = ledger.get(proposal.superseded_by_id)
        except ProposalNotFound:
            return proposal
        if successor.supersedes_id != proposal.proposal_id:
            return proposal  # a link the edit did not write: do not follow it
        seen.add(successor.proposal_id)
        proposal = successor
    return proposal


def earlier_links(ledger: ProposalReader, proposal: Proposal) -> list[Proposal]:
    """The proposals ``proposal`` replaced, the model's own first: ``[]`` if never edited.

    Only intact links are followed (each one superseded by the next), so a row written outside
    the supervisor cannot graft another call's arguments onto this one.
    """
    earlier: list[Proposal] = []
    seen = {proposal.proposal_id}
    current = proposal
    while current.supersedes_id and len(seen) < MAX_CHAIN:
        try:
            previous = ledger.get(current.supersedes_id)
        except ProposalNotFound:
            break
        if previous.superseded_by_id != current.proposal_id or previous.proposal_id in seen:
            break
        seen.add(previous.proposal_id)
        earlier.insert(0, previous)
        current = previous
    return earlier


def compact_diff(old: Any, new: Any) -> list[dict[str, Any]]:
    """The changed paths between two argument sets, each ``{"path", "old", "new"}``.

    An added path has no ``old``, a removed one no ``new`` (``diff_arguments`` without its
    ``op``, which the presence of the keys already says).
    """
    return [
        {key: change[key] for key in ("path", "old", "new") if key in change}
        for change in diff_arguments(old, new)
    ]


def edit_note(proposed: Any, ran_with: Any, *, edits: int = 1) -> dict[str, Any]:
    """What the model is told about a call a human edited: message, diff and final arguments.

    Args:
        proposed: The arguments the model proposed.
        ran_with: The arguments the call ran with (the approved edit's).
        edits: How many edits the chain holds.
    """
    return {
        "message": EDIT_MESSAGE,
        "edits": edits,
        "changed": compact_diff(proposed, ran_with),
        "arguments": ran_with,
    }
