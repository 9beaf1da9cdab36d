"""Amending a live proposal: edit (supersede with new arguments) and extend (expiry).

An edit never carries a reserved name (``approved``, ``confirm``, ``proposal_id``, any
``_name``...), whether or not the tool's schema is known, copies only what the audit chain
explains about the proposal it supersedes (its owner, user, thread, domains, risk and target:
:func:`~supervisor.ledger.trail.edit_refusal`), and gives the new proposal the TTL the old one
was proposed with. An extension is a finite number of seconds, at least
:data:`MIN_EXTENSION_SECONDS`, and never pushes a proposal's lifetime past ``extend_limits``
(:class:`~supervisor.ledger.retention.ExtendLimits`, settable per ledger handle) measured
against the TTL of the first proposal of its supersede chain, so editing never buys a longer
lifetime than extending alone.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from supervisor.canonical import args_hash as compute_args_hash
from supervisor.ledger.base import LedgerBase, validated_arguments
from supervisor.ledger.errors import (
    ApprovalExpired,
    AuditMismatch,
    ExtensionBeyondLimit,
    ExtensionNotFinite,
    ExtensionNotPositive,
    ExtensionTooSmall,
    LedgerError,
    ReservedArgumentEdit,
)
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.models import ApproverContext, Proposal, ProposalStatus, Via
from supervisor.ledger.policy import diff_arguments
from supervisor.ledger.retention import ExtendLimits
from supervisor.ledger.trail import Trail, edit_refusal, replay
from supervisor.store.repository import LedgerTx

_S = ProposalStatus
MIN_EXTENSION_SECONDS = 0.001
"""The smallest extension: anything shorter would (after rounding to microseconds) hardly or
not at all move the expiry, and an extension that does not move it is no extension."""


def checked_seconds(proposal_id: str, seconds: object) -> float:
    """``seconds`` as a finite float of at least :data:`MIN_EXTENSION_SECONDS`.

    Raises:
        ExtensionNotFinite: Not a real number, or NaN or infinite.
        ExtensionNotPositive: Zero or negative.
        ExtensionTooSmall: Positive but below :data:`MIN_EXTENSION_SECONDS`.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ExtensionNotFinite(proposal_id, seconds=seconds)
    try:
        value = float(seconds)
    except OverflowError:  # an int too large for a float
        raise ExtensionNotFinite(proposal_id, seconds=seconds) from None
    if not math.isfinite(value):
        raise ExtensionNotFinite(proposal_id, seconds=seconds)
    if value <= 0:
        raise ExtensionNotPositive(proposal_id, seconds=value)
    if value < MIN_EXTENSION_SECONDS:
        raise ExtensionTooSmall(proposal_id, seconds=value, minimum=MIN_EXTENSION_SECONDS)
    return value


def _audited_trail(tx: LedgerTx, proposal: Proposal) -> Trail:
    """The proposal's trail (one indexed read of its audit records, ``ix_audit_subject``)."""
    return replay(proposal.proposal_id, tx.audit_of(proposal.proposal_id))


def _refuse_reserved(proposal_id: str, arguments: Mapping[str, Any]) -> None:
    from supervisor.tools.policy import is_reserved_name

    reserved = sorted(name for name in arguments if is_reserved_name(name))
    if reserved:
        raise ReservedArgumentEdit(proposal_id, names=reserved)


class AmendMixin(LedgerBase):
    """``edit`` and ``extend``."""

    extend_limits: ExtendLimits = ExtendLimits()

    def edit(
        self,
        proposal_id: str,
        new_arguments: Mapping[str, Any],
        approver_id: str,
        reason: str | None = None,
        *,
        context: ApproverContext | None = None,
        via: Via | None = None,
        ttl_seconds: float | None = None,
    ) -> Proposal:
        """Supersede a pending proposal with a new pending one carrying different arguments.

        The old proposal becomes ``superseded`` (``superseded_by_id`` set), the new one links
        back with ``supersedes_id``; the audit record holds the argument diff. The new
        proposal copies the old one's owner, user, thread, domains, risk and target, which must
        be the ones the audit chain recorded.

        Args:
            proposal_id: The pending proposal.
            new_arguments: The arguments that replace its arguments.
            approver_id: Who edits it.
            reason: Why (audited).
            context: The approver's identity context.
            via: Where the decision came from.
            ttl_seconds: The new proposal's TTL; by default the TTL the old one was proposed
                with (so an edit never resets a short approval window to a long default).

        Returns:
            The new pending proposal (it needs its own approval).

        Raises:
            ProposalNotFound, ApprovalAlreadyDecided, ApprovalExpired, ApproverNotAllowed,
            CanonicalJSONError: As for :meth:`approve`, or the new arguments are not JSON.
            ReservedArgumentEdit: A top-level argument has a reserved name.
            AuditMismatch: The old proposal's row is not what the audit chain explains
                (written outside the supervisor); nothing is written.
            ValueError: ``ttl_seconds`` is not positive.
        """
        validated = validated_arguments(new_arguments)
        _refuse_reserved(proposal_id, validated)
        if ttl_seconds is not None and not ttl_seconds > 0:
            raise ValueError("ttl_seconds must be positive.")
        ctx = self._context(context, via)
        identity = EnvironmentIdentity.current()
        expired_error: LedgerError | None = None
        with self.repository.write() as tx:
            now = self._now()
            old = self._load(tx, proposal_id)
            if old.status is not _S.PENDING:
                raise self._state_error(tx, old, "edited")
            policy_version = self._check_grant(tx, old, identity, approver_id, approving=False)
            if old.expires_at <= now:
                self._expire_in_tx(tx, old, now)
                expired_error = ApprovalExpired(proposal_id, expires_at=old.expires_at)
            else:
                trail = _audited_trail(tx, old)
                refusal = edit_refusal(trail, old)
                if refusal is not None:
                    raise AuditMismatch(proposal_id, detail=refusal)
                # The TTL the old one was proposed with, not this process's default: an edit
                # must not turn a 60-second approval window into a day.
                ttl = trail.proposed_ttl_seconds if ttl_seconds is None else ttl_seconds
                original_ttl = trail.original_ttl_seconds
                if ttl is None or not ttl > 0 or original_ttl is None:
                    raise AuditMismatch(proposal_id, detail="its propose record has no usable TTL")
                new = old.model_copy(
                    update={
                        "proposal_id": uuid.uuid4().hex,
                        "arguments": validated,
                        "args_hash": compute_args_hash(
                            old.tool_name, old.tool_schema_hash, validated, old.execution_target
                        ),
                        "created_at": now, "updated_at": now,
                        "expires_at": now + timedelta(seconds=ttl),
                        "supersedes_id": old.proposal_id,
                    }
                )  # fmt: skip
                changed = tx.update_proposal(
                    proposal_id,
                    expect_status=_S.PENDING,
                    values={
                        "status": _S.SUPERSEDED, "decided_at": now, "updated_at": now,
                        "approver_id": approver_id, "approver_context": ctx,
                        "decision_reason": reason, "superseded_by_id": new.proposal_id,
                    },
                )  # fmt: skip
                if changed != 1:
                    raise self._state_error(tx, self._load(tx, proposal_id), "edited")
                tx.insert_proposal(new)
                payload = self._decision_payload(
                    old, to_status=_S.SUPERSEDED, approver_id=approver_id, reason=reason,
                    context=ctx, identity=identity, policy_version=policy_version,
                )  # fmt: skip
                payload.update(
                    superseded_by_id=new.proposal_id,
                    new_args_hash=new.args_hash,
                    diff=diff_arguments(old.arguments, validated),
                )
                tx.append_audit(
                    at=now, actor=approver_id, action="edit", subject=proposal_id, payload=payload
                )
                self._audit_proposed(tx, new, now, original_ttl_seconds=original_ttl)
        if expired_error is not None:
            raise expired_error
        return new

    def extend(
        self,
        proposal_id: str,
        seconds: float,
        approver_id: str,
        reason: str | None = None,
        *,
        context: ApproverContext | None = None,
        via: Via | None = None,
        up_to_limit: bool = False,
    ) -> Proposal:
        """Push back the expiry of a pending or approved proposal by ``seconds`` (audited).

        The proposal's lifetime (expiry minus creation) stays within ``extend_limits``,
        measured against the TTL of the first proposal of its supersede chain (from the
        ``propose`` audit records: an edited proposal keeps its original's basis).

        Args:
            proposal_id: The proposal.
            seconds: How far to push the expiry (finite, at least
                :data:`MIN_EXTENSION_SECONDS`).
            approver_id: Who extends it.
            reason: Why (audited).
            context: The approver's identity context.
            via: Where the decision came from.
            up_to_limit: Extend by less than ``seconds`` when only that much is left under
                the limit (refused only when nothing is left).

        Raises:
            ExtensionNotFinite, ExtensionNotPositive, ExtensionTooSmall: ``seconds`` is NaN,
                infinite, not a number, zero, negative or below 1 ms (also ``ValueError``s).
            ExtensionBeyondLimit: The new expiry would pass the lifetime limit.
            ProposalNotFound, ApprovalAlreadyDecided, ApproverNotAllowed: As for :meth:`approve`.
            ApprovalExpired: It already expired; an expired proposal is never revived.
        """
        seconds = checked_seconds(proposal_id, seconds)
        ctx = self._context(context, via)
        identity = EnvironmentIdentity.current()
        expired_error: LedgerError | None = None
        with self.repository.write() as tx:
            now = self._now()
            current = self._load(tx, proposal_id)
            if current.status not in (_S.PENDING, _S.APPROVED):
                raise self._state_error(tx, current, "extended")
            policy_version = self._check_grant(tx, current, identity, approver_id, approving=False)
            if current.expires_at <= now:
                self._expire_in_tx(tx, current, now)
                expired_error = ApprovalExpired(proposal_id, expires_at=current.expires_at)
            else:
                trail = _audited_trail(tx, current)
                basis = trail.original_ttl_seconds
                if basis is None:  # no propose record: the claim refuses it anyway
                    basis = (current.expires_at - current.created_at).total_seconds()
                lifetime = self.extend_limits.max_lifetime(basis)
                latest = (trail.proposed_at or current.created_at) + timedelta(seconds=lifetime)
                room = (latest - current.expires_at).total_seconds()
                if up_to_limit and room >= MIN_EXTENSION_SECONDS:
                    seconds = min(seconds, room)
                if seconds > room:
                    raise ExtensionBeyondLimit(
                        proposal_id, seconds=seconds, max_expires_at=latest, max_seconds=room
                    )
                new_expiry = current.expires_at + timedelta(seconds=seconds)
                changed = tx.update_proposal(
                    proposal_id,
                    expect_status=current.status,
                    expect_expires_at=current.expires_at,
                    values={"expires_at": new_expiry, "updated_at": now},
                )
                if changed != 1:
                    raise self._state_error(tx, self._load(tx, proposal_id), "extended")
                tx.append_audit(
                    at=now, actor=approver_id, action="extend", subject=proposal_id,
                    payload={
                        "old_expires_at": current.expires_at.isoformat(),
                        "new_expires_at": new_expiry.isoformat(),
                        "seconds": seconds, "reason": reason, "context": ctx.model_dump(),
                        "identity": str(identity), "policy_version": policy_version,
                        "domains": list(current.domains),
                    },
                )  # fmt: skip
                updated = self._load(tx, proposal_id)
        if expired_error is not None:
            raise expired_error
        return updated
