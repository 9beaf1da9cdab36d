"""Repository operations for what agent runs leave in the ledger: checkpoints, trace events,
blobs and issued result pointers. Mixed into :class:`supervisor.store.repository.LedgerTx`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, SQLModel, col, select

from supervisor.ledger.models import Blob, Checkpoint, TraceEvent
from supervisor.store.convert import (
    blob_from_row,
    blob_to_values,
    checkpoint_from_row,
    checkpoint_to_values,
    trace_from_row,
    trace_to_values,
)
from supervisor.store.limits import LimitsMixin
from supervisor.store.pointer_table import ResultPointerRow
from supervisor.store.tables import BlobRow, CheckpointRow, TraceEventRow

_TRACE = SQLModel.metadata.tables[TraceEventRow.__tablename__]
_CHECKPOINT = SQLModel.metadata.tables[CheckpointRow.__tablename__]
_INSERT_CHECKPOINT = sa.insert(_CHECKPOINT)
_INSERT_TRACE = sa.insert(_TRACE)
_BLOB = SQLModel.metadata.tables[BlobRow.__tablename__]
_POINTER = SQLModel.metadata.tables[ResultPointerRow.__tablename__]
_TRACE_COLUMNS = (
    "at", "agent_id", "thread_id", "run_id", "kind", "tool", "outcome_status", "reason_code",
    "payload_json", "blob_ref",
)  # fmt: skip
_COPY_TRACE = f"COPY trace_event ({', '.join(_TRACE_COLUMNS)}) FROM STDIN"
COPY_FROM = 16
"""On PostgreSQL a batch of at least this many trace events is written with ``COPY`` (one
round trip) instead of ``executemany`` (one pipelined statement per event)."""


def _postgresql_insert() -> Any:
    """PostgreSQL's ``INSERT ... ON CONFLICT`` construct, imported only by a PostgreSQL ledger
    (the dialect costs ~50 ms to import and a SQLite ledger never needs it)."""
    from sqlalchemy.dialects.postgresql import insert

    return insert


def _utc(moment: datetime) -> datetime:
    """What the ``UTCDateTime`` column type binds on PostgreSQL, for the ``COPY`` path."""
    if moment.tzinfo is None:
        raise ValueError("The ledger stores only timezone-aware datetimes.")
    return moment.astimezone(UTC)


# A digest names its content: a blob already stored is left as it is, on both engines.
# (PostgreSQL's is built on first use: only a PostgreSQL ledger imports that dialect.)
_INSERT_BLOB: dict[str, Any] = {
    "sqlite": sqlite_insert(_BLOB).on_conflict_do_nothing(index_elements=["sha256"]),
}
_HAS_BLOB = sa.select(_BLOB.c.sha256).where(_BLOB.c.sha256 == sa.bindparam("w_sha256"))


class RunsMixin(LimitsMixin):
    """Checkpoint, trace, blob and result pointer persistence."""

    session: Session
    dialect: str
    traced: bool

    if TYPE_CHECKING:

        def _execute(self, statement: Any, params: Any = None) -> sa.CursorResult[Any]: ...

        def _settled_driver(self) -> Any: ...

        def _hot(
            self, statement: Any, params: dict[str, Any] | None = None, *, insert: bool = False
        ) -> Any: ...

    # checkpoints -------------------------------------------------------------------------
    def insert_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Store a checkpoint (checkpoints are immutable; a new state is a new checkpoint)."""
        self._execute(_INSERT_CHECKPOINT, checkpoint_to_values(checkpoint))

    def checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with that id, if any."""
        row = self.session.exec(select(CheckpointRow).where(CheckpointRow.id == checkpoint_id))
        found = row.first()
        return checkpoint_from_row(found) if found else None

    def latest_checkpoint(self, agent_id: str, thread_id: str) -> Checkpoint | None:
        """The newest checkpoint of an agent's thread, if any."""
        query = (
            select(CheckpointRow)
            .where(CheckpointRow.agent_id == agent_id, CheckpointRow.thread_id == thread_id)
            .order_by(col(CheckpointRow.seq).desc())
            .limit(1)
        )
        found = self.session.exec(query).first()
        return checkpoint_from_row(found) if found else None

    # trace events ------------------------------------------------------------------------
    def insert_trace_events(self, events: Sequence[TraceEvent]) -> None:
        """Bulk-insert trace events (ids are assigned by the database, ascending)."""
        if not events:
            return
        rows = [trace_to_values(event) for event in events]
        if self.dialect == "postgresql" and len(rows) >= COPY_FROM:
            self._copy_trace(rows)
        else:
            self._execute(_INSERT_TRACE, rows)
        self.traced = True

    def _copy_trace(self, rows: list[dict[str, Any]]) -> None:
        """``COPY ... FROM STDIN`` on this transaction's own psycopg connection; a driver error
        is raised as SQLAlchemy raises it from ``execute``, so it is classified the same way."""
        import psycopg

        driver = self._settled_driver()
        try:
            with driver.cursor() as cursor, cursor.copy(_COPY_TRACE) as copy:
                for row in rows:
                    copy.write_row(
                        (_utc(row["at"]), *(row[column] for column in _TRACE_COLUMNS[1:]))
                    )
        except psycopg.Error as error:
            raise sa.exc.DBAPIError.instance(_COPY_TRACE, None, error, psycopg.Error) from error

    def trace_events(
        self,
        *,
        agent_id: str | None = None,
        thread_id: str | None = None,
        run_id: str | None = None,
        kind: str | None = None,
        after_id: int = 0,
        limit: int = 500,
        newest_first: bool = False,
    ) -> list[TraceEvent]:
        """Trace events after ``after_id`` matching every given filter, ascending by id (or
        descending with ``newest_first``)."""
        query = select(TraceEventRow).where(col(TraceEventRow.id) > after_id)
        if agent_id is not None:
            query = query.where(TraceEventRow.agent_id == agent_id)
        if thread_id is not None:
            query = query.where(TraceEventRow.thread_id == thread_id)
        if run_id is not None:
            query = query.where(TraceEventRow.run_id == run_id)
        if kind is not None:
            query = query.where(TraceEventRow.kind == kind)
        order = col(TraceEventRow.id).desc() if newest_first else col(TraceEventRow.id)
        query = query.order_by(order).limit(limit)
        return [trace_from_row(row) for row in self.session.exec(query).all()]

    # blobs -------------------------------------------------------------------------------
    def has_blob(self, digest: str) -> bool:
        """Whether a blob is stored under ``digest``."""
        return self._hot(_HAS_BLOB, {"w_sha256": digest}).first() is not None

    def stored_blob(self, digest: str) -> Blob | None:
        """The blob stored under ``digest`` exactly as stored, content included (unverified:
        the ledger checks the content against the digest)."""
        row = self.session.get(BlobRow, digest)
        return blob_from_row(row) if row else None

    def insert_blob(self, blob: Blob, created_at: datetime) -> None:
        """Store a blob's content under its digest, unless that digest is already stored.

        ``INSERT ... ON CONFLICT DO NOTHING`` on both engines, so processes racing to store the
        same new blob all succeed and it is stored once (the digest names the content).
        """
        statement = _INSERT_BLOB.get(self.dialect)
        if statement is None:
            statement = _INSERT_BLOB[self.dialect] = _postgresql_insert()(
                _BLOB
            ).on_conflict_do_nothing(index_elements=["sha256"])
        self._hot(statement, blob_to_values(blob, created_at), insert=True)

    # result pointers ---------------------------------------------------------------------
    def insert_result_pointer(
        self, digest: str, agent_id: str, thread_id: str, user_id: str, issued_at: datetime
    ) -> None:
        """Record that an offloaded result was handed to this agent thread and user (once)."""
        insert = sqlite_insert if self.dialect == "sqlite" else _postgresql_insert()
        statement = (
            insert(_POINTER)
            .values(
                digest=digest,
                agent_id=agent_id,
                thread_id=thread_id,
                user_id=user_id,
                issued_at=issued_at,
            )
            .on_conflict_do_nothing(index_elements=["digest", "agent_id", "thread_id", "user_id"])
        )
        self.session.connection().execute(statement)

    def result_pointer_exists(
        self, digest: str, agent_id: str, thread_id: str, user_id: str
    ) -> bool:
        """Whether that exact pointer was issued."""
        key = (digest, agent_id, thread_id, user_id)
        return self.session.get(ResultPointerRow, key) is not None
