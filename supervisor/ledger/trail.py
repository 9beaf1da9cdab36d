"""One proposal's audit records folded into the state they explain.

The chain is the only record of what a human decided; a proposal row is a cache of it that any
process able to write the ledger could change. :class:`Trail` folds one proposal's records
(oldest first) into status, args hash, expiry, approver and claims, and notes the first record
the chain itself cannot explain (a transition from the wrong state). The claim refuses unless
the row agrees with its trail (:func:`claim_refusal`); ``supervisor.ledger.verify`` replays the
whole chain against every row with the same fold.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from supervisor.ledger.clock import as_utc
from supervisor.ledger.models import AuditRecord, Proposal, ProposalStatus

_S = ProposalStatus

#: Decisions by a person: action -> (the status it leaves, the status it enters).
_DECISIONS: dict[str, tuple[ProposalStatus, ProposalStatus]] = {
    "approve": (_S.PENDING, _S.APPROVED),
    "reject": (_S.PENDING, _S.REJECTED),
    "cancel": (_S.PENDING, _S.CANCELLED),
    "revoke": (_S.APPROVED, _S.CANCELLED),
    "edit": (_S.PENDING, _S.SUPERSEDED),
}
#: What an executor records about a claimed call: action -> (from, to).
_EXECUTION_STEPS: dict[str, tuple[ProposalStatus, ProposalStatus]] = {
    "complete": (_S.EXECUTING, _S.EXECUTED),
    "fail": (_S.EXECUTING, _S.FAILED),
    "needs_reconciliation": (_S.EXECUTING, _S.NEEDS_RECONCILIATION),
}
PROPOSAL_ACTIONS = frozenset(
    {"propose", "expire", "extend", "claim", "claim_refused", "reconcile"}
    | set(_DECISIONS)
    | set(_EXECUTION_STEPS)
)
"""Every action the ledger writes about one proposal (its subject is the proposal id)."""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return as_utc(datetime.fromisoformat(value))
    except ValueError:
        return None


@dataclass(slots=True)
class Trail:
    """What one proposal's audit records explain, folded oldest first."""

    proposal_id: str
    status: ProposalStatus | None = None
    args_hash: str | None = None
    expires_at: datetime | None = None
    approver_id: str | None = None
    approved_args_hash: str | None = None
    claimed_args_hash: str | None = None
    claims: int = 0
    superseded_by_id: str | None = None
    purged: bool = False
    problem: str | None = None
    """The first record the chain itself cannot explain (a transition from the wrong state)."""

    def _refuse(self, record: AuditRecord, why: str) -> None:
        if self.problem is None:
            self.problem = f"seq {record.seq} ({record.action}): {why}"

    def apply(self, record: AuditRecord) -> None:
        """Fold one record about this proposal into the trail."""
        action, payload = record.action, record.payload
        if action not in PROPOSAL_ACTIONS or action == "claim_refused":
            return
        if self.purged:
            self._refuse(record, "recorded after the proposal was purged")
            return
        if action == "propose":
            if self.status is not None:
                self._refuse(record, "proposed twice")
                return
            self.status = _S.PENDING
            self.args_hash = _text(payload.get("args_hash"))
            self.expires_at = _moment(payload.get("expires_at"))
            return
        if self.status is None:
            self._refuse(record, "no propose record before it")
            return
        if action == "claim":
            self.claims += 1
        step = _DECISIONS.get(action) or _EXECUTION_STEPS.get(action)
        if step is not None:
            self._step(record, *step)
        elif action == "expire":
            self._expire(record)
        elif action == "extend":
            self._extend(record)
        elif action == "claim":
            self._claim(record)
        elif action == "reconcile":
            self._reconcile(record)

    def _step(self, record: AuditRecord, source: ProposalStatus, target: ProposalStatus) -> None:
        if self.status is not source:
            self._refuse(record, f"the proposal was {self.status}, not {source}")
            return
        payload = record.payload
        if record.action in _DECISIONS:
            if payload.get("args_hash") != self.args_hash:
                self._refuse(record, "decided on a different args hash than proposed")
                return
            self.approver_id = _text(payload.get("approver_id"))
            if record.action == "approve":
                self.approved_args_hash = self.args_hash
            if record.action == "edit":
                self.superseded_by_id = _text(payload.get("superseded_by_id"))
        self.status = target

    def _expire(self, record: AuditRecord) -> None:
        if self.status not in (_S.PENDING, _S.APPROVED):
            self._refuse(record, f"the proposal was {self.status}")
            return
        if _moment(record.payload.get("expires_at")) != self.expires_at:
            self._refuse(record, "expired at a time the chain does not explain")
            return
        self.status = _S.EXPIRED

    def _extend(self, record: AuditRecord) -> None:
        old, new = (
            _moment(record.payload.get(key)) for key in ("old_expires_at", "new_expires_at")
        )
        if self.status not in (_S.PENDING, _S.APPROVED):
            self._refuse(record, f"the proposal was {self.status}")
        elif old != self.expires_at or new is None or old is None or new <= old:
            self._refuse(record, "an extension from an expiry the chain does not explain")
        else:
            self.expires_at = new

    def _claim(self, record: AuditRecord) -> None:
        if self.status is not _S.APPROVED:
            self._refuse(record, f"claimed while {self.status}")
            return
        claimed = _text(record.payload.get("args_hash"))
        if claimed != self.approved_args_hash:
            self._refuse(record, "claimed with a different args hash than approved")
            return
        self.claimed_args_hash = claimed
        self.status = _S.EXECUTING

    def _reconcile(self, record: AuditRecord) -> None:
        outcome = record.payload.get("outcome")
        if self.status is not _S.NEEDS_RECONCILIATION or outcome not in ("executed", "failed"):
            self._refuse(record, f"reconciled while {self.status}")
            return
        self.status = _S(outcome)


def replay(proposal_id: str, records: Iterable[AuditRecord]) -> Trail:
    """The trail of one proposal from its audit records (ascending seq; other subjects are
    ignored).

    Records' own hashes are not recomputed here: the chain's hash is public and keyless, so
    anyone able to insert a record can compute it; ``verify`` checks the chain as a whole.
    """
    trail = Trail(proposal_id)
    for record in records:
        if record.subject == proposal_id:
            trail.apply(record)
    return trail


def claim_refusal(trail: Trail, proposal: Proposal, expected_args_hash: str) -> str | None:
    """Why the audit chain does not allow claiming ``proposal`` now, or ``None`` if it does.

    The chain must hold the proposal's propose record with the row's args hash, an approve of
    that exact hash as its latest decision (no revoke, cancel or expiry after it), an expiry
    equal to the row's (proposed, or moved by an audited extend) and no earlier claim.
    """
    if trail.status is None:
        return "the audit chain has no propose record for it"
    if trail.problem is not None:
        return trail.problem
    if trail.claims:
        return "the audit chain already records a claim of it"
    if trail.status is not _S.APPROVED:
        return f"the audit chain says it is {trail.status}, not approved"
    if trail.args_hash != proposal.args_hash:
        return "its args hash is not the one proposed"
    if trail.approved_args_hash != expected_args_hash:
        return "the approved args hash is not the one about to run"
    if trail.expires_at != proposal.expires_at:
        return "its expiry is not the one proposed or extended"
    return None
