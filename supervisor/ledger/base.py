"""Shared state and helpers of the approval ledger's parts."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from supervisor.canonical import normalise
from supervisor.errors import CanonicalJSONError
from supervisor.ledger.clock import Clock, SystemClock, as_utc
from supervisor.ledger.errors import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    LedgerError,
    NotApproved,
    ProposalNotFound,
)
from supervisor.ledger.models import ApproverContext, Execution, Proposal, ProposalStatus, Via
from supervisor.ledger.policy import ApprovalPolicy
from supervisor.store.migrate import ensure_schema
from supervisor.store.repository import LedgerTx, Repository

DEFAULT_TTL_SECONDS = 24 * 3600.0


def validated_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments as normalised JSON data.

    Raises:
        CanonicalJSONError: Not a JSON object of JSON data.
    """
    if not isinstance(arguments, Mapping):
        raise CanonicalJSONError(
            "Tool arguments must be a JSON object.", hint="Pass a dict of argument names."
        )
    validated: dict[str, Any] = normalise(dict(arguments))
    return validated


class LedgerBase:
    """Construction and helpers shared by the ledger's mixins.

    Args:
        engine_or_repository: An engine (its schema is brought current) or a repository.
        clock: Where time comes from; inject a ``ManualClock`` in tests.
        policy: Optional self-approval and per-domain allowlist rules.
        default_ttl_seconds: Expiry of proposals proposed without an explicit TTL.
    """

    def __init__(
        self,
        engine_or_repository: Engine | Repository,
        clock: Clock | None = None,
        *,
        policy: ApprovalPolicy | None = None,
        default_ttl_seconds: float = DEFAULT_TTL_SECONDS,
    ) -> None:
        if isinstance(engine_or_repository, Repository):
            self.repository = engine_or_repository
        else:
            ensure_schema(engine_or_repository)
            self.repository = Repository(engine_or_repository)
        self.clock: Clock = clock or SystemClock()
        self.policy = policy or ApprovalPolicy()
        self.default_ttl_seconds = default_ttl_seconds

    def _now(self) -> datetime:
        return as_utc(self.clock.now())

    @staticmethod
    def _load(tx: LedgerTx, proposal_id: str) -> Proposal:
        proposal = tx.proposal(proposal_id)
        if proposal is None:
            raise ProposalNotFound(proposal_id)
        return proposal

    @staticmethod
    def _load_for_write(tx: LedgerTx, proposal_id: str) -> tuple[Proposal, Execution | None]:
        """The proposal and its execution (if claimed), in one statement of a write."""
        found = tx.proposal_for_write(proposal_id)
        if found is None:
            raise ProposalNotFound(proposal_id)
        return found

    @staticmethod
    def _state_error(tx: LedgerTx, proposal: Proposal, wanted: str) -> LedgerError:
        """The precise error for acting on ``proposal`` in a state that does not allow it."""
        status = proposal.status
        if status is ProposalStatus.EXPIRED:
            return ApprovalExpired(proposal.proposal_id, expires_at=proposal.expires_at)
        if status is ProposalStatus.PENDING and wanted in ("claimed", "revoked"):
            return NotApproved(proposal.proposal_id, status=status.value)
        if status.consumed:
            execution = tx.execution(proposal.proposal_id)
            if execution is not None:
                return ApprovalAlreadyDecided(
                    proposal.proposal_id,
                    status=status.value,
                    by=execution.executor.executor_id,
                    at=execution.started_at,
                    wanted=wanted,
                )
        return ApprovalAlreadyDecided(
            proposal.proposal_id,
            status=status.value,
            by=proposal.approver_id,
            at=proposal.decided_at,
            wanted=wanted,
        )

    @staticmethod
    def _decision_payload(
        proposal: Proposal,
        *,
        to_status: ProposalStatus,
        approver_id: str,
        reason: str | None,
        context: ApproverContext,
    ) -> dict[str, Any]:
        return {
            "from": proposal.status.value,
            "to": to_status.value,
            "args_hash": proposal.args_hash,
            "approver_id": approver_id,
            "reason": reason,
            "context": context.model_dump(),
        }

    @staticmethod
    def _context(context: ApproverContext | None, via: Via | None) -> ApproverContext:
        if context is None:
            return ApproverContext.current(via or "sdk")
        if via is not None and context.via != via:
            return context.model_copy(update={"via": via})
        return context

    @staticmethod
    def _expire_in_tx(tx: LedgerTx, proposal: Proposal, now: datetime) -> bool:
        """Mark a pending/approved proposal whose expiry passed as expired, with its audit row."""
        changed = tx.update_proposal(
            proposal.proposal_id,
            expect_status=proposal.status,
            expect_expires_at=proposal.expires_at,
            values={"status": ProposalStatus.EXPIRED, "updated_at": now},
        )
        if changed == 1:
            tx.append_audit(
                at=now,
                actor="ledger",
                action="expire",
                subject=proposal.proposal_id,
                payload={
                    "from": proposal.status.value,
                    "to": "expired",
                    "expires_at": proposal.expires_at.isoformat(),
                },
            )
        return changed == 1

    @staticmethod
    def _audit_proposed(tx: LedgerTx, proposal: Proposal, now: datetime) -> None:
        tx.append_audit(
            at=now,
            actor=proposal.owner or "agent",
            action="propose",
            subject=proposal.proposal_id,
            payload={
                "tool": proposal.tool_name,
                "schema_hash": proposal.tool_schema_hash,
                "args_hash": proposal.args_hash,
                "target": proposal.execution_target,
                "owner": proposal.owner,
                "user": proposal.user,
                "thread_id": proposal.thread_id,
                "expires_at": proposal.expires_at.isoformat(),
                "supersedes_id": proposal.supersedes_id,
            },
        )
