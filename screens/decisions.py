"""What an operator decides about a proposal: a closed union of small records.

The main screen builds one of these from a key and a dialog, and its decision worker matches on
it (``assert_never`` makes a forgotten case a type error). ``name`` is the action's short name,
shown when it fails; ``done`` heads the toast once it reached the ledger, and
:func:`similar_detail` / :func:`conflict_message` say the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, TypeAlias

from screens.literal import escaped
from supervisor.ledger.errors import ApprovalAlreadyDecided
from supervisor.services.grants import GrantRequest, SimilarResult
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


@dataclass(frozen=True)
class ApproveSimilar:
    """Approve the proposal and grant similar calls (``request``), then approve the pending
    proposals the operator saw listed as matched (``request.also_approve``)."""

    proposal_id: str
    guard: RenderedGuard | None
    request: GrantRequest
    name: ClassVar[str] = "approve_similar"
    done: ClassVar[str] = "Approved and granted"


Decision: TypeAlias = Approve | BatchApprove | Reject | Cancel | Extend | Edit | ApproveSimilar


def similar_detail(result: SimilarResult) -> str:
    """``grant 1a2b…: 20 uses until 12:15:00 UTC; also approved 2; <why others failed>``."""
    grant = result.grant
    parts = [
        f"grant {grant.grant_id[:12]}: {grant.max_uses} uses until {grant.expires_at:%H:%M:%S} UTC"
    ]
    if result.approved:
        parts.append(f"also approved {len(result.approved)}")
    parts.extend(
        conflict_message(e) if isinstance(e, ApprovalAlreadyDecided) else escaped(e.message)
        for e in result.failed
    )
    return "; ".join(parts)


def conflict_message(error: ApprovalAlreadyDecided) -> str:
    """``Already approved by alice@host at 12:00:03 UTC`` for the loser of a race."""
    when = f"{error.at:%Y-%m-%d %H:%M:%S} UTC" if isinstance(error.at, datetime) else "?"
    return f"Already {escaped(error.status)} by {escaped(error.by or 'the ledger')} at {when}."
