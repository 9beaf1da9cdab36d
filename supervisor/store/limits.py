"""Repository queries behind the ledger's trace retention.

Mixed into :class:`supervisor.store.repository.LedgerTx` through ``RunsMixin``. Pruning works
on the primary key only (no index on ``at`` is needed): trace ids ascend with time, so the age
limit becomes an id found by bisection, a handful of indexed lookups on any table size.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Session, SQLModel, col, select

from supervisor.ledger.clock import as_utc
from supervisor.store.tables import ProposalOpenRow, ProposalRow, TraceEventRow

_TRACE = SQLModel.metadata.tables[TraceEventRow.__tablename__]
_PROPOSAL = SQLModel.metadata.tables[ProposalRow.__tablename__]
_OPEN = SQLModel.metadata.tables[ProposalOpenRow.__tablename__]


class LimitsMixin:
    """Trace pruning."""

    session: Session
    dialect: str

    def _trace_row_at_or_after(self, event_id: int) -> tuple[int, datetime] | None:
        query = (
            select(TraceEventRow.id, TraceEventRow.at)
            .where(col(TraceEventRow.id) >= event_id)
            .order_by(col(TraceEventRow.id))
            .limit(1)
        )
        row = self.session.exec(query).first()
        return None if row is None or row[0] is None else (int(row[0]), as_utc(row[1]))

    def last_trace_id_before(self, moment: datetime) -> int:
        """The largest trace id whose event is older than ``moment`` (0: none), by bisection."""
        low_row = self._trace_row_at_or_after(0)
        if low_row is None or low_row[1] >= moment:
            return 0
        high = int(self.session.exec(select(sa.func.max(TraceEventRow.id))).one() or 0)
        high_row = self._trace_row_at_or_after(high)
        if high_row is not None and high_row[1] < moment:
            return high
        # Invariant: the event at ``low`` is older than moment; the first at or after ``high``
        # is not.
        low = low_row[0]
        while high - low > 1:
            middle = (low + high) // 2
            found = self._trace_row_at_or_after(middle)
            if found is not None and found[1] < moment:
                low = found[0]
            else:
                high = middle
        return low

    def prune_trace_events(
        self, *, before: datetime | None, keep_last: int | None, limit: int | None
    ) -> int:
        """Delete trace events older than ``before`` or beyond the newest ``keep_last``.

        Events of a thread with a live proposal are kept whatever their age. At most ``limit``
        events are deleted (oldest first) when it is given.

        Returns:
            How many events were deleted.
        """
        newest = int(self.session.exec(select(sa.func.max(TraceEventRow.id))).one() or 0)
        cutoff = 0
        if keep_last is not None:
            cutoff = max(cutoff, newest - keep_last)
        if before is not None:
            cutoff = max(cutoff, self.last_trace_id_before(before))
        if cutoff <= 0:
            return 0
        # The threads of open proposals (not terminal): their trace events are evidence.
        live_threads = (
            sa.select(_PROPOSAL.c.thread_id)
            .select_from(_OPEN.join(_PROPOSAL, _PROPOSAL.c.id == _OPEN.c.proposal_id))
            .where(_PROPOSAL.c.thread_id.is_not(None))
            .distinct()
        )
        victims = (
            sa.select(_TRACE.c.id)
            .where(
                _TRACE.c.id <= cutoff,
                sa.or_(_TRACE.c.thread_id.is_(None), _TRACE.c.thread_id.not_in(live_threads)),
            )
            .order_by(_TRACE.c.id)
        )
        if limit is not None:
            victims = victims.limit(limit)
        deleted = self.session.connection().execute(
            sa.delete(_TRACE).where(_TRACE.c.id.in_(victims))
        )
        return int(deleted.rowcount or 0)
