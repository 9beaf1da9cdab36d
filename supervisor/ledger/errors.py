"""Typed ledger errors: each has a stable ``code`` and a message that says what to do."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from supervisor.errors import SupervisorError


def _when(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment else "an unknown time"


class LedgerError(SupervisorError):
    """Base of every error raised by the approval ledger."""

    code = "ledger_error"


class ProposalNotFound(LedgerError, LookupError):
    """No proposal has that id (it never existed or was purged by retention)."""

    code = "proposal_not_found"

    def __init__(self, proposal_id: str) -> None:
        self.proposal_id = proposal_id
        super().__init__(
            f"No proposal {proposal_id!r} in the ledger.",
            hint="Check the id with `supervisor list`; purged proposals remain in the audit log.",
            proposal_id=proposal_id,
        )


class ApprovalAlreadyDecided(LedgerError):
    """The proposal is no longer in the state the action needs; someone else acted first."""

    code = "approval_already_decided"

    def __init__(
        self,
        proposal_id: str,
        *,
        status: str,
        by: str | None,
        at: datetime | None,
        wanted: str,
    ) -> None:
        self.proposal_id = proposal_id
        self.status = status
        self.by = by
        self.at = at
        who = by or "the ledger"
        super().__init__(
            f"Proposal {proposal_id} is already {status} (by {who} at {_when(at)}); "
            f"it cannot be {wanted}.",
            hint="Reload the proposal; a consumed or decided proposal is never reused.",
            proposal_id=proposal_id,
            status=status,
            by=by,
            at=at.isoformat() if at else None,
        )


class NotApproved(LedgerError):
    """The proposal has not been approved yet, so it cannot run."""

    code = "not_approved"

    def __init__(self, proposal_id: str, *, status: str) -> None:
        self.proposal_id = proposal_id
        self.status = status
        super().__init__(
            f"Proposal {proposal_id} is {status}; only an approved proposal can be claimed.",
            hint="Wait for a human decision (`supervisor list --status pending`).",
            proposal_id=proposal_id,
            status=status,
        )


class ApprovalExpired(LedgerError):
    """The proposal's expiry passed before the action."""

    code = "approval_expired"

    def __init__(self, proposal_id: str, *, expires_at: datetime) -> None:
        self.proposal_id = proposal_id
        self.expires_at = expires_at
        super().__init__(
            f"Proposal {proposal_id} expired at {_when(expires_at)}.",
            hint="Ask the agent to propose the call again, or extend it before it expires.",
            proposal_id=proposal_id,
            expires_at=expires_at.isoformat(),
        )


class ArgumentsMismatch(LedgerError):
    """What is about to run does not hash to what was approved (changed args or tampering)."""

    code = "arguments_mismatch"

    def __init__(self, proposal_id: str, *, expected: str, stored: str, recomputed: str) -> None:
        self.proposal_id = proposal_id
        super().__init__(
            f"Proposal {proposal_id}: arguments hash mismatch "
            f"(caller {expected[:12]}, stored {stored[:12]}, recomputed {recomputed[:12]}). "
            "Nothing was executed.",
            hint="Propose the call again with the exact arguments; check the ledger for tampering "
            "with `supervisor audit verify`.",
            proposal_id=proposal_id,
            expected=expected,
            stored=stored,
            recomputed=recomputed,
        )


class AuditMismatch(LedgerError):
    """The proposal's row says something its audit records do not (the ledger was written to
    outside the supervisor): nothing may run on it."""

    code = "audit_mismatch"

    def __init__(self, proposal_id: str, *, detail: str) -> None:
        self.proposal_id = proposal_id
        self.detail = detail
        super().__init__(
            f"Proposal {proposal_id}: the ledger row does not match its audit records ({detail}). "
            "Nothing was executed.",
            hint="Someone wrote to the ledger outside the supervisor: run `supervisor audit "
            "verify` and do not trust this proposal; propose the call again if it is wanted.",
            proposal_id=proposal_id,
            detail=detail,
        )


class InvalidAnchor(LedgerError, ValueError):
    """An audit anchor is not ``HASH`` or ``SEQ:HASH`` (a 64-digit hex SHA-256)."""

    code = "invalid_anchor"

    def __init__(self, anchor: str) -> None:
        super().__init__(
            f"Not an audit anchor: {anchor!r}.",
            hint="Pass the hash printed by `supervisor audit head` (HASH or SEQ:HASH).",
            anchor=anchor,
        )


class NotOwner(LedgerError, PermissionError):
    """The caller is not the party this action belongs to (e.g. another executor's claim)."""

    code = "not_owner"

    def __init__(self, proposal_id: str, *, actor: str, owner: str) -> None:
        self.proposal_id = proposal_id
        super().__init__(
            f"{actor!r} cannot act on proposal {proposal_id}; it belongs to {owner!r}.",
            hint="Only the executor that claimed a proposal may record its outcome.",
            proposal_id=proposal_id,
            actor=actor,
            owner=owner,
        )


class ApproverNotAllowed(LedgerError, PermissionError):
    """The approver is not on the allowlist for one of the proposal's domains."""

    code = "approver_not_allowed"

    def __init__(self, proposal_id: str, *, approver_id: str, domain: str) -> None:
        self.proposal_id = proposal_id
        self.approver_id = approver_id
        super().__init__(
            f"{approver_id!r} may not decide proposal {proposal_id} (domain {domain!r}).",
            hint="Ask an approver listed for that domain.",
            proposal_id=proposal_id,
            approver_id=approver_id,
            domain=domain,
        )


class SelfApprovalForbidden(LedgerError, PermissionError):
    """Policy forbids the requesting user from approving their own proposal."""

    code = "self_approval_forbidden"

    def __init__(self, proposal_id: str, *, approver_id: str) -> None:
        self.proposal_id = proposal_id
        self.approver_id = approver_id
        super().__init__(
            f"{approver_id!r} requested proposal {proposal_id} and may not approve it.",
            hint="Ask a different approver (the ledger forbids self-approval).",
            proposal_id=proposal_id,
            approver_id=approver_id,
        )


class BlobCorrupted(LedgerError):
    """Stored blob content no longer matches its digest."""

    code = "blob_corrupted"

    def __init__(self, digest: str, *, actual: str) -> None:
        super().__init__(
            f"Blob {digest[:12]} is corrupted (content hashes to {actual[:12]}).",
            hint="Restore the ledger from a backup; do not trust this content.",
            digest=digest,
            actual=actual,
        )


class LedgerSchemaTooNew(LedgerError):
    """The ledger was written by a newer release than this code."""

    code = "ledger_schema_too_new"

    def __init__(self, *, found: Any, supported: Any, url: str) -> None:
        super().__init__(
            f"The ledger at {url} has schema version {found}; this release understands "
            f"up to {supported}.",
            hint="Upgrade agent-supervisor (pip install -U agent-supervisor) or point "
            "SUPERVISOR_DB at another ledger.",
            found=found,
            supported=supported,
        )


class LedgerBusy(LedgerError):
    """The ledger stayed locked by other writers past the busy timeout."""

    code = "ledger_busy"


class LedgerUnavailable(LedgerError):
    """The ledger cannot be reached or written (server down, disk full, read-only file)."""

    code = "ledger_unavailable"
