"""One proposal's audit records folded into the state they explain.

The chain is the only record of what a human decided; a proposal row is a cache of it that any
process able to write the ledger could change. :class:`Trail` folds one proposal's records
(oldest first) into status, args hash, expiry, approver, claims, the fields the propose record
binds (owner, user, thread, domains, risk, target, supersede link: :func:`bound_fields`) and what
the executor recorded (executor, outcome status, result reference), and notes the first record
the chain itself cannot explain (a transition from the wrong state, a decision checked against
other domains or another user than proposed). The claim refuses unless the row agrees with its
trail (:func:`claim_refusal`), an edit unless the proposal it supersedes does
(:func:`edit_refusal`); ``supervisor.ledger.verify`` replays the whole chain against every row
with the same fold.

A key the record does not hold (records written before it was bound) is not checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from supervisor.canonical import canonical_json
from supervisor.errors import CanonicalJSONError
from supervisor.ledger.clock import as_utc
from supervisor.ledger.models import AuditRecord, Execution, Proposal, ProposalStatus

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
    {"propose", "expire", "extend", "claim", "claim_refused", "reconcile", "approve_vote"}
    | set(_DECISIONS)
    | set(_EXECUTION_STEPS)
)
"""Every action the ledger writes about one proposal (its subject is the proposal id)."""
PENDING_CHANGES = frozenset(
    {action for action, (before, _) in _DECISIONS.items() if before is _S.PENDING}
    | {"expire", "extend"}
)
"""The actions that end a pending proposal or move its expiry: what a waiter for its decision
follows (a quorum's ``approve_vote`` leaves it pending)."""
LEFT_PENDING = frozenset(set(_DECISIONS) | set(_EXECUTION_STEPS) | {"expire", "claim", "reconcile"})
"""The actions written only about a proposal that is no longer pending, or as it stops being
pending. A proposal is pending only from its creation (``propose``), so one of these records
proves it will never be pending again, without reading it."""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _shown(value: Any) -> str | None:
    """A bound value in the one form rows and records are compared in (``None`` stays)."""
    if value is None or isinstance(value, str):
        return value
    try:
        return canonical_json(value)
    except CanonicalJSONError:
        return repr(value)


def _shown_domains(value: Any) -> str | None:
    """Domains compared as a set (the order a tool lists them in means nothing)."""
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return canonical_json(sorted(set(value)))
    return _shown(value)


BoundField = Literal["owner", "user", "thread_id", "domains", "risk", "target", "supersedes_id"]
ExecutedField = Literal["executor", "outcome_status", "result_ref"]

#: Fields of a proposal row that its propose record binds: payload key -> the row's value.
_BOUND: dict[BoundField, Callable[[Proposal], Any]] = {
    "owner": lambda p: p.owner,
    "user": lambda p: p.user,
    "thread_id": lambda p: p.thread_id,
    "domains": lambda p: _shown_domains(p.domains),
    "risk": lambda p: p.risk,
    "target": lambda p: _shown(p.execution_target),
    "supersedes_id": lambda p: p.supersedes_id,
}
BOUND_FIELDS: tuple[BoundField, ...] = tuple(_BOUND)
"""The proposal fields a propose record binds (besides tool, args hash and expiry)."""


def quorum_person(identity: str) -> str:
    """The OS user of an identity (``user@host`` -> ``user``, casefolded): quorum approvers must
    be distinct users, not the same user on two hosts."""
    return identity.rpartition("@")[0].casefold() if "@" in identity else identity.casefold()


def bound_fields(proposal: Proposal) -> dict[BoundField, str | None]:
    """The row's values of :data:`BOUND_FIELDS`, in the form the trail holds them."""
    return {key: _shown(value(proposal)) for key, value in _BOUND.items()}


def _proposed_fields(payload: dict[str, Any]) -> dict[BoundField, str | None]:
    return {
        key: _shown_domains(payload[key]) if key == "domains" else _shown(payload[key])
        for key in BOUND_FIELDS
        if key in payload
    }


def execution_fields(execution: Execution) -> dict[ExecutedField, str | None]:
    """An execution row's values of the fields claim/complete/fail records bind."""
    return {
        "executor": _shown(execution.executor.model_dump()),
        "outcome_status": execution.outcome_status,
        "result_ref": execution.result_ref,
    }


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
    proposed: dict[BoundField, str | None] = field(default_factory=dict)
    """The :data:`BOUND_FIELDS` the propose record holds."""
    proposed_at: datetime | None = None
    proposed_expires_at: datetime | None = None
    original_ttl_seconds: float | None = None
    """The TTL of the first proposal of its supersede chain: the basis of the extend cap."""
    executed: dict[ExecutedField, str | None] = field(default_factory=dict)
    """What claim / complete / fail recorded: executor, outcome_status, result_ref (none
    before complete / fail)."""
    approvals_required: int = 1
    """Distinct approvers a quorum rule asked for (the propose record's ``approvals_required``)."""
    voters: set[str] = field(default_factory=set)
    """The identities of the ``approve_vote`` records so far."""
    purged: bool = False
    problem: str | None = None
    """The first record the chain itself cannot explain (a transition from the wrong state)."""

    @property
    def proposed_ttl_seconds(self) -> float | None:
        """The lifetime it was proposed with (proposed expiry minus the propose record's time)."""
        if self.proposed_at is None or self.proposed_expires_at is None:
            return None
        return (self.proposed_expires_at - self.proposed_at).total_seconds()

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
            self.expires_at = self.proposed_expires_at = _moment(payload.get("expires_at"))
            self.proposed_at = as_utc(record.at)
            self.proposed = _proposed_fields(payload)
            original = payload.get("original_ttl_seconds")
            if isinstance(original, int | float) and not isinstance(original, bool):
                if math.isfinite(original) and original > 0:
                    self.original_ttl_seconds = float(original)
            if self.original_ttl_seconds is None:
                self.original_ttl_seconds = self.proposed_ttl_seconds
            required = payload.get("approvals_required", 1)
            if isinstance(required, int) and not isinstance(required, bool) and required > 1:
                self.approvals_required = required
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
        elif action == "approve_vote":
            self._vote(record)

    def _vote(self, record: AuditRecord) -> None:
        """One approval of a quorum proposal that leaves it pending."""
        identity = quorum_person(_text(record.payload.get("identity")) or "") or None
        if self.status is not _S.PENDING or self.approvals_required <= 1:
            self._refuse(record, "a quorum vote on a proposal that was not awaiting one")
        elif record.payload.get("args_hash") != self.args_hash:
            self._refuse(record, "voted on a different args hash than proposed")
        elif identity is None or identity in self.voters:
            self._refuse(record, "a second vote by the same OS user")
        else:
            self.voters.add(identity)

    def _step(self, record: AuditRecord, source: ProposalStatus, target: ProposalStatus) -> None:
        if self.status is not source:
            self._refuse(record, f"the proposal was {self.status}, not {source}")
            return
        payload = record.payload
        if record.action in _DECISIONS:
            if payload.get("args_hash") != self.args_hash:
                self._refuse(record, "decided on a different args hash than proposed")
                return
            if not self._checked_as_proposed(record):
                return
            self.approver_id = _text(payload.get("approver_id"))
            if record.action == "approve":
                voters = self.voters | {quorum_person(_text(payload.get("identity")) or "")}
                if len(voters) < self.approvals_required:
                    self._refuse(record, f"approved by {len(voters)} distinct approver(s) of "
                                 f"the {self.approvals_required} its quorum needs")  # fmt: skip
                    return
                self.approved_args_hash = self.args_hash
            if record.action == "edit":
                self.superseded_by_id = _text(payload.get("superseded_by_id"))
        elif record.action in ("complete", "fail"):
            outcome: tuple[ExecutedField, ...] = ("outcome_status", "result_ref")
            for key in outcome:
                if key in payload:
                    self.executed[key] = _shown(payload[key])
        self.status = target

    def _checked_as_proposed(self, record: AuditRecord) -> bool:
        """A granting decision records the domains and user its policy check saw; they must be
        the proposed ones (else the row was rewritten to pass the policy). Refuses if not."""
        payload = record.payload
        checked: tuple[BoundField, ...] = ("domains", "user")
        for key in checked:
            if key in payload and key in self.proposed:
                seen = _shown_domains(payload[key]) if key == "domains" else _shown(payload[key])
                if seen != self.proposed[key]:
                    why = f"the policy was checked against another {key} than proposed"
                    self._refuse(record, why)
                    return False
        return True

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
        elif self._checked_as_proposed(record):
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
        self.executed["outcome_status"] = self.executed["result_ref"] = None
        if "executor" in record.payload:
            self.executed["executor"] = _shown(record.payload["executor"])
        self.status = _S.EXECUTING

    def _reconcile(self, record: AuditRecord) -> None:
        outcome = record.payload.get("outcome")
        if self.status is not _S.NEEDS_RECONCILIATION or outcome not in ("executed", "failed"):
            self._refuse(record, f"reconciled while {self.status}")
            return
        if self._checked_as_proposed(record):  # checked by the policy like an approval
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


def field_disagreements(
    trail: Trail, proposal: Proposal
) -> list[tuple[BoundField, str | None, str | None]]:
    """The :data:`BOUND_FIELDS` whose row value is not the proposed one: (field, chain, row)."""
    row = bound_fields(proposal)
    return [
        (key, chain_says, row[key])
        for key, chain_says in trail.proposed.items()
        if chain_says != row[key]
    ]


def _row_refusal(trail: Trail, proposal: Proposal) -> str | None:
    """Why the row's args hash, expiry or bound fields are not what the trail explains."""
    if trail.args_hash != proposal.args_hash:
        return "its args hash is not the one proposed"
    if trail.expires_at != proposal.expires_at:
        return "its expiry is not the one proposed or extended"
    disagreements = field_disagreements(trail, proposal)
    if disagreements:
        key, chain_says, row_says = disagreements[0]
        return f"its {key} is {row_says!r}, not the proposed {chain_says!r}"
    return None


def claim_refusal(trail: Trail, proposal: Proposal, expected_args_hash: str) -> str | None:
    """Why the audit chain does not allow claiming ``proposal`` now, or ``None`` if it does.

    The chain must hold the proposal's propose record with the row's args hash, owner, user,
    thread, domains, risk, target and supersede link, an approve of that exact hash (checked
    against the proposed domains and user) as its latest decision (no revoke, cancel or expiry
    after it), an expiry equal to the row's (proposed, or moved by an audited extend) and no
    earlier claim.
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
    return _row_refusal(trail, proposal)


def edit_refusal(trail: Trail, proposal: Proposal) -> str | None:
    """Why the audit chain does not explain the pending ``proposal`` an edit would copy, or
    ``None`` if it does (the new proposal inherits its owner, user, thread, domains, risk and
    target, so they must be the proposed ones)."""
    if trail.status is None:
        return "the audit chain has no propose record for it"
    if trail.problem is not None:
        return trail.problem
    if trail.status is not _S.PENDING:
        return f"the audit chain says it is {trail.status}, not pending"
    return _row_refusal(trail, proposal)
