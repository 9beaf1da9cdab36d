"""The approval ledger: domain models, errors, clocks and the ``ApprovalLedger`` service."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.ledger.clock import Clock, ManualClock, SystemClock
from supervisor.ledger.errors import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApproverNotAllowed,
    ArgumentsMismatch,
    AuditMismatch,
    BlobCorrupted,
    IdentityNotVerified,
    LedgerBusy,
    LedgerError,
    LedgerSchemaTooNew,
    LedgerUnavailable,
    NotApproved,
    NotOwner,
    PolicyInvalid,
    PolicyMismatch,
    ProposalNotFound,
    SelfApprovalForbidden,
)
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.models import (
    ApproverContext,
    AuditRecord,
    AuditReport,
    Blob,
    Checkpoint,
    Execution,
    ExecutorIdentity,
    ProcessRecord,
    Proposal,
    ProposalPage,
    ProposalStatus,
    TraceEvent,
    Via,
)
from supervisor.ledger.policy import ApprovalPolicy, PolicyVersion

if TYPE_CHECKING:
    from supervisor.ledger.service import ApprovalLedger


def __getattr__(name: str) -> Any:
    # The service imports the store, which imports this package's errors: load it lazily.
    if name == "ApprovalLedger":
        from supervisor.ledger.service import ApprovalLedger

        return ApprovalLedger
    raise AttributeError(name)


__all__ = [
    "ApprovalAlreadyDecided",
    "ApprovalExpired",
    "ApprovalLedger",
    "ApprovalPolicy",
    "ApproverContext",
    "ApproverNotAllowed",
    "ArgumentsMismatch",
    "AuditMismatch",
    "AuditRecord",
    "AuditReport",
    "Blob",
    "BlobCorrupted",
    "Checkpoint",
    "Clock",
    "EnvironmentIdentity",
    "Execution",
    "ExecutorIdentity",
    "IdentityNotVerified",
    "LedgerBusy",
    "LedgerError",
    "LedgerSchemaTooNew",
    "LedgerUnavailable",
    "ManualClock",
    "NotApproved",
    "NotOwner",
    "PolicyInvalid",
    "PolicyMismatch",
    "PolicyVersion",
    "ProcessRecord",
    "Proposal",
    "ProposalNotFound",
    "ProposalPage",
    "ProposalStatus",
    "SelfApprovalForbidden",
    "SystemClock",
    "TraceEvent",
    "Via",
]
