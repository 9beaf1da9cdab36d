"""What an operator decides about a proposal: a closed union of small records.

The main screen builds one of these from a key and a dialog, and its decision worker matches on
it (``assert_never`` makes a forgotten case a type error). ``name`` is the action's short name,
shown when it fails; ``done`` heads the toast once it reached the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from supervisor.services.guard import RenderedGuard


@dataclass(frozen=True)
class Approve:
    """Approve one proposal whose arguments were drawn in full (``guard``).

    ``resume``: its agent is gone, so also start ``supervisor resume`` on it once approved.
    """

    proposal_id: str
    guard: RenderedGuard | None
    resume: bool = False
    name: ClassVar[str] = "approve"
    done: ClassVar[str] = "Approved"


@dataclass(frozen=True)
class BatchApprove:
    """Approve every pending twin ``ids`` (same tool and args hash) of ``proposal_id``."""

    proposal_id: str
    guard: RenderedGuard | None
    ids: tuple[str, ...]
    name: ClassVar[str] = "batch_approve"
    done: ClassVar[str] = "Approved"


@dataclass(frozen=True)
class Reject:
    """Reject with a reason (required)."""

    proposal_id: str
    reason: str
    name: ClassVar[str] = "reject"
    done: ClassVar[str] = "Rejected"


@dataclass(frozen=True)
class Cancel:
    """Withdraw a pending proposal (the reason is optional)."""

    proposal_id: str
    reason: str | None
    name: ClassVar[str] = "cancel"
    done: ClassVar[str] = "Cancelled"


@dataclass(frozen=True)
class Extend:
    """Push back the proposal's expiry by the settings' extension."""

    proposal_id: str
    name: ClassVar[str] = "extend"
    done: ClassVar[str] = "Extended"


@dataclass(frozen=True)
class Edit:
    """Supersede the proposal with edited ``arguments`` (a new pending proposal)."""

    proposal_id: str
    guard: RenderedGuard | None
    arguments: dict[str, Any]
    name: ClassVar[str] = "edit"
    done: ClassVar[str] = "New proposal"


Decision: TypeAlias = Approve | BatchApprove | Reject | Cancel | Extend | Edit
