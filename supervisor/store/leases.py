"""Repository operations for leases and proposal waiters. Mixed into
:class:`supervisor.store.repository.LedgerTx`.

Every change is one conditional statement checked by its row count, so two processes racing
for one lease (on SQLite or PostgreSQL) cannot both win.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlmodel import SQLModel

from supervisor.ledger.models import Lease, ProcessRecord
from supervisor.store.convert import process_from_row
from supervisor.store.lease_tables import LeaseRow, ProposalWaiterRow
from supervisor.store.tables import ProcessRow

_LEASE = SQLModel.metadata.tables[LeaseRow.__tablename__]
_WAITER = SQLModel.metadata.tables[ProposalWaiterRow.__tablename__]
_PROCESS = SQLModel.metadata.tables[ProcessRow.__tablename__]
_SELECT_LEASE = sa.select(_LEASE).where(_LEASE.c.resource == sa.bindparam("w_resource"))


def _lease(row: Any) -> Lease:
    return Lease(
        resource=row.resource,
        holder=row.holder,
        acquired_at=row.acquired_at,
        expires_at=row.expires_at,
    )


class LeasesMixin:
    """Lease and waiter persistence."""

    if TYPE_CHECKING:

        def _execute(self, statement: Any, params: Any = None) -> sa.CursorResult[Any]: ...

    # leases ------------------------------------------------------------------------------
    def lease(self, resource: str) -> Lease | None:
        """The lease on ``resource`` (expired or not), if any."""
        row = self._execute(_SELECT_LEASE, {"w_resource": resource}).first()
        return _lease(row) if row else None

    def insert_lease(self, lease: Lease) -> None:
        """Record a lease on a resource nobody holds (the primary key refuses a second)."""
        self._execute(
            sa.insert(_LEASE).values(
                resource=lease.resource,
                holder=lease.holder,
                acquired_at=lease.acquired_at,
                expires_at=lease.expires_at,
            )
        )

    def take_lease(self, previous: Lease, lease: Lease) -> bool:
        """Replace ``previous`` by ``lease`` if nobody renewed or took it since it was read."""
        result = self._execute(
            sa.update(_LEASE)
            .where(
                _LEASE.c.resource == previous.resource,
                _LEASE.c.holder == previous.holder,
                _LEASE.c.expires_at == previous.expires_at,
            )
            .values(holder=lease.holder, acquired_at=lease.acquired_at, expires_at=lease.expires_at)
        )
        return result.rowcount == 1

    def renew_lease(self, resource: str, holder: str, expires_at: datetime) -> bool:
        """Move the deadline of a lease ``holder`` still holds (nobody took it over)."""
        result = self._execute(
            sa.update(_LEASE)
            .where(_LEASE.c.resource == resource, _LEASE.c.holder == holder)
            .values(expires_at=expires_at)
        )
        return result.rowcount == 1

    def delete_lease(self, resource: str, holder: str) -> bool:
        """Release a lease ``holder`` holds (a lease someone took over stays theirs)."""
        result = self._execute(
            sa.delete(_LEASE).where(_LEASE.c.resource == resource, _LEASE.c.holder == holder)
        )
        return result.rowcount == 1

    # waiters -----------------------------------------------------------------------------
    def set_waiters(self, process_id: str, proposal_ids: Sequence[str], since: datetime) -> None:
        """Record ``process_id`` as the process waiting on each proposal (replacing any other)."""
        ids = list(dict.fromkeys(proposal_ids))
        if not ids:
            return
        self._execute(sa.delete(_WAITER).where(_WAITER.c.proposal_id.in_(ids)))
        self._execute(
            sa.insert(_WAITER),
            [{"proposal_id": pid, "process_id": process_id, "since": since} for pid in ids],
        )

    def waiters(
        self, proposal_ids: Sequence[str]
    ) -> list[tuple[str, str, datetime, ProcessRecord | None]]:
        """(proposal id, process id, since, the process row or None) for each known waiter."""
        ids = list(dict.fromkeys(proposal_ids))
        found: list[tuple[str, str, datetime, ProcessRecord | None]] = []
        for start in range(0, len(ids), 500):
            query = (
                sa.select(_WAITER, *[c.label(f"p_{c.name}") for c in _PROCESS.c])
                .select_from(_WAITER.outerjoin(_PROCESS, _PROCESS.c.id == _WAITER.c.process_id))
                .where(_WAITER.c.proposal_id.in_(ids[start : start + 500]))
            )
            for row in self._execute(query):
                process = None
                if row.p_id is not None:
                    values = {c.name: getattr(row, f"p_{c.name}") for c in _PROCESS.c}
                    process = process_from_row(ProcessRow(**values))
                found.append((row.proposal_id, row.process_id, row.since, process))
        return found

    def delete_waiters(self, proposal_ids: Sequence[str]) -> None:
        """Forget the waiters of deleted proposals."""
        if proposal_ids:
            self._execute(sa.delete(_WAITER).where(_WAITER.c.proposal_id.in_(list(proposal_ids))))
