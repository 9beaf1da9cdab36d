"""Amending a live proposal: edit (supersede with new arguments) and extend (expiry).

An edit never carries a reserved name (``approved``, ``confirm``, ``proposal_id``, any
``_name``...), whether or not the tool's schema is known. An extension is a positive, finite
number of seconds and never pushes a proposal's lifetime past ``extend_limits``
(:class:`~supervisor.ledger.retention.ExtendLimits`, settable per ledger handle).
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
    ExtensionBeyondLimit,
    ExtensionNotFinite,
    ExtensionNotPositive,
    LedgerError,
    ReservedArgumentEdit,
)
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.models import ApproverContext, Proposal, ProposalStatus, Via
from supervisor.ledger.policy import diff_arguments
from supervisor.ledger.retention import ExtendLimits

_S = ProposalStatus


def checked_seconds(proposal_id: str, seconds: object) -> float:
    """``seconds`` as a positive, finite float.

    Raises:
        ExtensionNotFinite: Not a real number, or NaN or infinite.
        ExtensionNotPositive: Zero or negative.
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
    return value


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
        back with ``supersedes_id``; the audit record holds the argument diff.

        Returns:
            The new pending proposal (it needs its own approval).

        Raises:
            ProposalNotFound, ApprovalAlreadyDecided, ApprovalExpired, ApproverNotAllowed,
            CanonicalJSONError: As for :meth:`approve`, or the new arguments are not JSON.
            ReservedArgumentEdit: A top-level argument has a reserved name.
        """
        validated = validated_arguments(new_arguments)
        _refuse_reserved(proposal_id, validated)
        ctx = self._context(context, via)
        ttl = self.default_ttl_seconds if ttl_seconds is None else ttl_seconds
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
                self._audit_proposed(tx, new, now)
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

        The proposal's lifetime (expiry minus creation) stays within ``extend_limits``
        (measured against the TTL it was proposed with, from its ``propose`` audit record).

        Args:
            proposal_id: The proposal.
            seconds: How far to push the expiry (positive, finite).
            approver_id: Who extends it.
            reason: Why (audited).
            context: The approver's identity context.
            via: Where the decision came from.
            up_to_limit: Extend by less than ``seconds`` when only that much is left under
                the limit (refused only when nothing is left).

        Raises:
            ExtensionNotFinite, ExtensionNotPositive: ``seconds`` is NaN, infinite, not a
                number, zero or negative (also ``ValueError``s).
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
                original = tx.proposed_expiry(proposal_id) or current.expires_at
                lifetime = self.extend_limits.max_lifetime(
                    (original - current.created_at).total_seconds()
                )
                latest = current.created_at + timedelta(seconds=lifetime)
                room = (latest - current.expires_at).total_seconds()
                if up_to_limit and room > 0:
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
                    },
                )  # fmt: skip
                updated = self._load(tx, proposal_id)
        if expired_error is not None:
            raise expired_error
        return updated
