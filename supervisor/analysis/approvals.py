"""What an exported trace may say about an approval: a proposal's facts, never its arguments.

:class:`ApprovalFacts` is built from a proposal and its execution record and holds only
content-free evidence: ids, the tool name, the args hash, who or which rule decided, the
reason given, the quorum votes and the times (proposed, decided, expires, claimed). Exports
read approvals through it, so argument values cannot reach a trace file or a collector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from supervisor.ledger.models import Execution, Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger

_S = ProposalStatus

Decision = Literal["pending", "approved", "rejected", "expired", "cancelled", "superseded"]
"""How the wait for a decision ended (``pending``: it has not)."""

#: Decisions after which the call never ran.
NOT_RUN_DECISIONS: frozenset[Decision] = frozenset({"rejected", "expired", "cancelled"})

_DECISIONS: dict[ProposalStatus, Decision] = {
    _S.PENDING: "pending",
    _S.APPROVED: "approved",
    _S.EXECUTING: "approved",
    _S.EXECUTED: "approved",
    _S.FAILED: "approved",
    _S.NEEDS_RECONCILIATION: "approved",
    _S.REJECTED: "rejected",
    _S.EXPIRED: "expired",
    _S.CANCELLED: "cancelled",
    _S.SUPERSEDED: "superseded",
}


class Vote(BaseModel):
    """One quorum approval: which OS identity, under which approver label, when."""

    model_config = ConfigDict(frozen=True)

    identity: str
    approver_id: str
    at: datetime


class ApprovalFacts(BaseModel):
    """The content-free facts of one proposal (see the module docstring).

    Attributes:
        status: The ledger status now (``executed``, ``rejected`` …).
        approver_identity: ``user@host`` of the deciding process, for people.
        rule: The rule that decided (its name), or ``None``.
        grant: The grant that decided (its id), or ``None``.
        decided_by: ``rule R (policy vN)``, ``grant G (policy vN)`` or the approver label.
        reason: The reason the approver or rule gave.
        claimed_at: When the approved call was claimed for execution (``None``: never).
    """

    model_config = ConfigDict(frozen=True)

    proposal_id: str
    tool_name: str
    call_id: str | None = None
    owner: str = ""
    thread_id: str | None = None
    args_hash: str
    status: ProposalStatus
    created_at: datetime
    decided_at: datetime | None = None
    expires_at: datetime
    approver_id: str | None = None
    approver_identity: str | None = None
    via: str | None = None
    rule: str | None = None
    grant: str | None = None
    decided_by: str | None = None
    policy_version: int | None = None
    reason: str | None = None
    approvals_required: int = 1
    votes: tuple[Vote, ...] = ()
    supersedes_id: str | None = None
    superseded_by_id: str | None = None
    claimed_at: datetime | None = None

    @classmethod
    def of(cls, proposal: Proposal, execution: Execution | None = None) -> ApprovalFacts:
        """The facts of ``proposal`` (and its execution record, if it was claimed)."""
        kind, _, name = (proposal.decided_by_rule or "").partition(":")
        context = proposal.approver_context
        return cls(
            proposal_id=proposal.proposal_id, tool_name=proposal.tool_name,
            call_id=proposal.call_id, owner=proposal.owner, thread_id=proposal.thread_id,
            args_hash=proposal.args_hash, status=proposal.status,
            created_at=proposal.created_at, decided_at=proposal.decided_at,
            expires_at=proposal.expires_at, approver_id=proposal.approver_id,
            approver_identity=f"{context.os_user}@{context.host}" if context else None,
            via=context.via if context else None,
            rule=name if kind == "rule" else None, grant=name if kind == "grant" else None,
            decided_by=proposal.decided_by, policy_version=proposal.policy_version,
            reason=proposal.decision_reason, approvals_required=proposal.approvals_required,
            votes=tuple(Vote(identity=vote.identity, approver_id=vote.approver_id, at=vote.at)
                        for vote in proposal.approvals),
            supersedes_id=proposal.supersedes_id, superseded_by_id=proposal.superseded_by_id,
            claimed_at=execution.started_at if execution else None,
        )  # fmt: skip

    def decision(self, now: datetime) -> Decision:
        """How the wait ended as of ``now``: an undecided or unclaimed approval whose expiry
        passed is ``expired`` even before a sweep marks it (the claim enforces expiry)."""
        if self.status in (_S.PENDING, _S.APPROVED) and self.expires_at <= now:
            return "expired"
        return _DECISIONS[self.status]

    def decided_moment(self, now: datetime) -> datetime:
        """When the decision became final: the decision time, the expiry for an expired one,
        ``now`` while pending (never before the proposal)."""
        decision = self.decision(now)
        if decision == "expired":
            moment = self.expires_at
        elif decision == "pending":
            moment = now
        else:
            moment = self.decided_at or self.created_at
        return max(moment, self.created_at)

    def redacted(self, redact_text: Callable[[str], str]) -> ApprovalFacts:
        """These facts with ``redact_text`` applied to every string (ids, names, reason)."""

        def text(value: str | None) -> str | None:
            return None if value is None else redact_text(value)

        return self.model_copy(
            update={
                "proposal_id": redact_text(self.proposal_id),
                "tool_name": redact_text(self.tool_name),
                "call_id": text(self.call_id),
                "owner": redact_text(self.owner),
                "thread_id": text(self.thread_id),
                "approver_id": text(self.approver_id),
                "approver_identity": text(self.approver_identity),
                "rule": text(self.rule),
                "grant": text(self.grant),
                "decided_by": text(self.decided_by),
                "reason": text(self.reason),
                "votes": tuple(
                    vote.model_copy(
                        update={
                            "identity": redact_text(vote.identity),
                            "approver_id": redact_text(vote.approver_id),
                        }
                    )
                    for vote in self.votes
                ),
                "supersedes_id": text(self.supersedes_id),
                "superseded_by_id": text(self.superseded_by_id),
            }
        )


def iter_approval_facts(ledger: ApprovalLedger) -> Iterator[ApprovalFacts]:
    """The facts of every proposal in the ledger (ascending id), read in pages."""
    after = ""
    while page := ledger.proposals_with_executions(after, 1000):
        yield from (ApprovalFacts.of(proposal, execution) for proposal, execution in page)
        after = page[-1][0].proposal_id
        if len(page) < 1000:
            return
