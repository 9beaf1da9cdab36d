"""Repository operations for the records around proposals: checkpoints, traces, blobs, tool
registry, agents and processes. Mixed into :class:`supervisor.store.repository.LedgerTx`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, SQLModel, col, select

from supervisor.canonical import canonical_json
from supervisor.ledger.models import (
    AgentRecord,
    Blob,
    Checkpoint,
    ProcessRecord,
    ToolRecord,
    TraceEvent,
)
from supervisor.store.convert import (
    agent_from_row,
    checkpoint_from_row,
    process_from_row,
    tool_from_row,
    trace_from_row,
)
from supervisor.store.limits import LimitsMixin
from supervisor.store.pointer_table import ResultPointerRow
from supervisor.store.tables import (
    AgentRow,
    BlobRow,
    CheckpointRow,
    ProcessRow,
    ToolRegistryRow,
    TraceEventRow,
)

_TRACE = SQLModel.metadata.tables[TraceEventRow.__tablename__]
_BLOB = SQLModel.metadata.tables[BlobRow.__tablename__]
_POINTER = SQLModel.metadata.tables[ResultPointerRow.__tablename__]


class RecordsMixin(LimitsMixin):
    """Checkpoint, trace, blob, tool, agent and process persistence."""

    session: Session
    dialect: str

    # checkpoints -------------------------------------------------------------------------
    def insert_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Store a checkpoint (checkpoints are immutable; a new state is a new checkpoint)."""
        self.session.add(
            CheckpointRow(
                id=checkpoint.checkpoint_id,
                agent_id=checkpoint.agent_id,
                thread_id=checkpoint.thread_id,
                messages_json=canonical_json(checkpoint.messages),
                pending_tool_calls_json=canonical_json(checkpoint.pending_tool_calls),
                state_json=canonical_json(checkpoint.state),
                schema_version=checkpoint.schema_version,
                created_at=checkpoint.created_at,
            )
        )

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
        rows = [
            {
                "at": event.at,
                "agent_id": event.agent_id,
                "thread_id": event.thread_id,
                "run_id": event.run_id,
                "kind": event.kind,
                "tool": event.tool,
                "outcome_status": event.outcome_status,
                "reason_code": event.reason_code,
                "payload_json": canonical_json(event.payload),
                "blob_ref": event.blob_ref,
            }
            for event in events
        ]
        self.session.connection().execute(sa.insert(_TRACE), rows)

    def trace_events(
        self,
        *,
        agent_id: str | None = None,
        thread_id: str | None = None,
        run_id: str | None = None,
        kind: str | None = None,
        after_id: int = 0,
        limit: int = 500,
    ) -> list[TraceEvent]:
        """Trace events after ``after_id`` matching every given filter, ascending by id."""
        query = select(TraceEventRow).where(col(TraceEventRow.id) > after_id)
        if agent_id is not None:
            query = query.where(TraceEventRow.agent_id == agent_id)
        if thread_id is not None:
            query = query.where(TraceEventRow.thread_id == thread_id)
        if run_id is not None:
            query = query.where(TraceEventRow.run_id == run_id)
        if kind is not None:
            query = query.where(TraceEventRow.kind == kind)
        query = query.order_by(col(TraceEventRow.id)).limit(limit)
        return [trace_from_row(row) for row in self.session.exec(query).all()]

    # blobs -------------------------------------------------------------------------------
    def blob_row(self, digest: str) -> BlobRow | None:
        """The stored blob row, content included."""
        return self.session.get(BlobRow, digest)

    def insert_blob(self, blob: Blob, created_at: datetime) -> None:
        """Store a blob's content under its digest, unless that digest is already stored.

        ``INSERT ... ON CONFLICT DO NOTHING`` on both engines, so processes racing to store the
        same new blob all succeed and it is stored once (the digest names the content).
        """
        insert = sqlite_insert if self.dialect == "sqlite" else postgresql_insert
        statement = (
            insert(_BLOB)
            .values(
                sha256=blob.sha256,
                size=blob.size,
                media_type=blob.media_type,
                preview=blob.preview,
                content=blob.content,
                created_at=created_at,
            )
            .on_conflict_do_nothing(index_elements=["sha256"])
        )
        self.session.connection().execute(statement)

    # result pointers ---------------------------------------------------------------------
    def insert_result_pointer(
        self, digest: str, agent_id: str, thread_id: str, user_id: str, issued_at: datetime
    ) -> None:
        """Record that an offloaded result was handed to this agent thread and user (once)."""
        insert = sqlite_insert if self.dialect == "sqlite" else postgresql_insert
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

    # tool registry -----------------------------------------------------------------------
    def upsert_tool(self, tool: ToolRecord, updated_at: datetime) -> None:
        """Insert or replace a tool registry entry by handle."""
        row = self.session.get(ToolRegistryRow, tool.handle) or ToolRegistryRow(
            handle=tool.handle, agent_id=tool.agent_id, name=tool.name, schema_hash="",
            updated_at=updated_at,
        )  # fmt: skip
        row.agent_id = tool.agent_id
        row.name = tool.name
        row.import_ref = tool.import_ref
        row.description = tool.description
        row.tool_schema_json = canonical_json(tool.json_schema)
        row.schema_hash = tool.schema_hash
        row.domains_json = canonical_json(list(tool.domains))
        row.flags_json = canonical_json(tool.flags)
        row.updated_at = updated_at
        self.session.add(row)

    def tool(self, handle: str) -> ToolRecord | None:
        """The registered tool with that handle, if any."""
        row = self.session.get(ToolRegistryRow, handle)
        return tool_from_row(row) if row else None

    def tools(self, agent_id: str | None = None) -> list[ToolRecord]:
        """Registered tools, optionally of one agent, ordered by name then handle."""
        query = select(ToolRegistryRow)
        if agent_id is not None:
            query = query.where(ToolRegistryRow.agent_id == agent_id)
        query = query.order_by(col(ToolRegistryRow.name), col(ToolRegistryRow.handle))
        return [tool_from_row(row) for row in self.session.exec(query).all()]

    # agents ------------------------------------------------------------------------------
    def save_agent(
        self, agent_id: str, name: str, config: dict[str, Any], updated_at: datetime
    ) -> None:
        """Insert or replace an agent's configuration."""
        row = self.session.get(AgentRow, agent_id) or AgentRow(
            id=agent_id, name=name, updated_at=updated_at
        )
        row.name = name
        row.config_json = canonical_json(config)
        row.updated_at = updated_at
        self.session.add(row)

    def agent(self, agent_id: str) -> AgentRecord | None:
        """An agent's saved configuration, if any."""
        row = self.session.get(AgentRow, agent_id)
        return agent_from_row(row) if row else None

    # processes ---------------------------------------------------------------------------
    def upsert_process(self, process: ProcessRecord) -> None:
        """Insert or replace a supervised process record."""
        row = self.session.get(ProcessRow, process.process_id) or ProcessRow(
            id=process.process_id, kind=process.kind, host=process.host, status=process.status,
            started_at=process.started_at, heartbeat_at=process.heartbeat_at,
        )  # fmt: skip
        row.kind = process.kind
        row.pid = process.pid
        row.host = process.host
        row.command = process.command
        row.status = process.status
        row.started_at = process.started_at
        row.heartbeat_at = process.heartbeat_at
        row.exit_code = process.exit_code
        self.session.add(row)

    def touch_process(
        self, process_id: str, at: datetime, status: str | None, exit_code: int | None
    ) -> ProcessRecord | None:
        """Record a heartbeat (and optionally a new status / exit code)."""
        row = self.session.get(ProcessRow, process_id)
        if row is None:
            return None
        row.heartbeat_at = at
        if status is not None:
            row.status = status
        if exit_code is not None:
            row.exit_code = exit_code
        self.session.add(row)
        self.session.flush()
        return process_from_row(row)

    def stale_processes(self, live_statuses: Sequence[str], stale_before: datetime) -> list[str]:
        """Ids of live rows whose heartbeat is older than ``stale_before``."""
        query = select(ProcessRow.id).where(
            col(ProcessRow.status).in_(list(live_statuses)),
            col(ProcessRow.heartbeat_at) < stale_before,
        )
        return list(self.session.exec(query).all())

    def mark_lost_processes(
        self, process_ids: Sequence[str], live_statuses: Sequence[str], stale_before: datetime
    ) -> list[ProcessRecord]:
        """Set ``lost`` on those rows that are still live and stale.

        Each row changes by one conditional UPDATE, so a heartbeat or final status that landed
        since the rows were read keeps its row.
        """
        table = SQLModel.metadata.tables[ProcessRow.__tablename__]
        stale = sa.and_(
            table.c.status.in_(list(live_statuses)), table.c.heartbeat_at < stale_before
        )
        connection = self.session.connection()
        lost: list[ProcessRecord] = []
        for process_id in process_ids:
            marked = connection.execute(
                sa.update(table).where(table.c.id == process_id, stale).values(status="lost")
            )
            if marked.rowcount == 1:
                row = self.session.get(ProcessRow, process_id, populate_existing=True)
                if row is not None:
                    lost.append(process_from_row(row))
        return lost

    def processes(self, status: str | None = None) -> list[ProcessRecord]:
        """Supervised processes, optionally in one status, newest first."""
        query = select(ProcessRow)
        if status is not None:
            query = query.where(ProcessRow.status == status)
        query = query.order_by(col(ProcessRow.started_at).desc(), col(ProcessRow.id))
        return [process_from_row(row) for row in self.session.exec(query).all()]
