"""Repository operations for the expiry sweep. Mixed into
:class:`supervisor.store.repository.LedgerTx`.

A sweep reads only what it checks and records of the due proposals, then expires them with one
conditional ``UPDATE`` per chunk of ids, inside the serialised write transaction that also
appends their audit records (``LedgerTx.append_audits``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa
from sqlmodel import SQLModel

from supervisor.ledger.models import ProposalStatus
from supervisor.store.tables import ProposalOpenRow, ProposalRow

_PROPOSAL = SQLModel.metadata.tables[ProposalRow.__tablename__]
_OPEN = SQLModel.metadata.tables[ProposalOpenRow.__tablename__]
# Pending or approved proposals whose expiry passed, soonest first, from the open set
# (ix_proposal_open_expires): only what the sweep checks and records.
_SELECT_DUE = (
    sa.select(_PROPOSAL.c.id, _PROPOSAL.c.status, _PROPOSAL.c.expires_at)
    .select_from(_OPEN.join(_PROPOSAL, _PROPOSAL.c.id == _OPEN.c.proposal_id))
    .where(
        _OPEN.c.expires_at <= sa.bindparam("w_now"),
        _PROPOSAL.c.status.in_([ProposalStatus.PENDING.value, ProposalStatus.APPROVED.value]),
    )
    .order_by(_OPEN.c.expires_at, _OPEN.c.proposal_id)
    .limit(sa.bindparam("w_limit"))
)
# An expiry sweep's conditional UPDATE of due proposals, _EXPIRE_CHUNK ids at a time (bound
# parameters are limited: 32,766 on SQLite, 65,535 on PostgreSQL); the ids it changed.
_EXPIRE_CHUNK = 1000
_EXPIRE_DUE = (
    sa.update(_PROPOSAL)
    .where(
        _PROPOSAL.c.id.in_(sa.bindparam("w_ids", expanding=True)),
        _PROPOSAL.c.status.in_([ProposalStatus.PENDING.value, ProposalStatus.APPROVED.value]),
        _PROPOSAL.c.expires_at <= sa.bindparam("w_now"),
    )
    .values(status=ProposalStatus.EXPIRED.value, updated_at=sa.bindparam("v_updated_at"))
    .returning(_PROPOSAL.c.id)
)

_CLOSE_DUE = sa.delete(_OPEN).where(_OPEN.c.proposal_id.in_(sa.bindparam("w_ids", expanding=True)))


class DueProposal(NamedTuple):
    """A proposal an expiry sweep is due to expire: what it checks and records of it."""

    proposal_id: str
    status: ProposalStatus
    expires_at: datetime


class ExpiryMixin:
    """Finding and expiring the proposals whose expiry passed."""

    if TYPE_CHECKING:

        def _execute(self, statement: Any, params: Any = None) -> sa.CursorResult[Any]: ...

    def expiry_due(self, now: datetime, limit: int) -> list[DueProposal]:
        """Pending or approved proposals whose expiry has passed, soonest first."""
        rows = self._execute(_SELECT_DUE, {"w_now": now, "w_limit": limit}).all()
        return [
            DueProposal(str(row.id), ProposalStatus(row.status), row.expires_at) for row in rows
        ]

    def expire_due_proposals(self, due: Sequence[DueProposal], now: datetime) -> set[str]:
        """Mark ``due`` (from :meth:`expiry_due`, read in this write transaction) expired
        with one UPDATE; returns the ids it changed.

        The UPDATE re-checks each row (still pending or approved, expiry passed); writers are
        serialised, so a changed row's status and expiry are still those read in ``due``.
        """
        changed: set[str] = set()
        for start in range(0, len(due), _EXPIRE_CHUNK):
            ids = [p.proposal_id for p in due[start : start + _EXPIRE_CHUNK]]
            params = {"w_ids": ids, "w_now": now, "v_updated_at": now}
            expired = [str(row.id) for row in self._execute(_EXPIRE_DUE, params).all()]
            if expired:  # out of the open set, in the same transaction
                self._execute(_CLOSE_DUE, {"w_ids": expired})
            changed.update(expired)
        return changed
