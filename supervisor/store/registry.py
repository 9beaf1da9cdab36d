"""Repository operations for what is registered in the ledger: tools, agents and supervised
processes. Mixed into :class:`supervisor.store.repository.LedgerTx`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, SQLModel, col, select

from supervisor.ledger.models import AgentRecord, ProcessRecord, ProcessStep, ToolRecord
from supervisor.store.convert import (
    agent_from_row,
    agent_to_values,
    process_from_row,
    process_to_values,
    step_to_json,
    tool_from_row,
    tool_to_values,
)
from supervisor.store.tables import AgentRow, ProcessRow, ToolRegistryRow

_PROCESS = SQLModel.metadata.tables[ProcessRow.__tablename__]


class RegistryMixin:
    """Tool registry, agent and process persistence."""

    session: Session

    # tool registry -----------------------------------------------------------------------
    def upsert_tool(self, tool: ToolRecord, updated_at: datetime) -> None:
        """Insert or replace a tool registry entry by handle."""
        values = tool_to_values(tool, updated_at)
        row = self.session.get(ToolRegistryRow, tool.handle)
        self.session.add(row.sqlmodel_update(values) if row else ToolRegistryRow(**values))

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
    def save_agent(self, agent: AgentRecord) -> None:
        """Insert or replace an agent's configuration."""
        values = agent_to_values(agent)
        row = self.session.get(AgentRow, agent.agent_id)
        self.session.add(row.sqlmodel_update(values) if row else AgentRow(**values))

    def agent(self, agent_id: str) -> AgentRecord | None:
        """An agent's saved configuration, if any."""
        row = self.session.get(AgentRow, agent_id)
        return agent_from_row(row) if row else None

    # processes ---------------------------------------------------------------------------
    def upsert_process(self, process: ProcessRecord) -> None:
        """Insert or replace a supervised process record."""
        values = process_to_values(process)
        row = self.session.get(ProcessRow, process.process_id)
        self.session.add(row.sqlmodel_update(values) if row else ProcessRow(**values))

    def touch_process(
        self,
        process_id: str,
        at: datetime,
        status: str | None,
        exit_code: int | None,
        *,
        live_statuses: Sequence[str],
        lease_until: datetime,
        step: ProcessStep | None = None,
    ) -> ProcessRecord | None:
        """Record a heartbeat (and optionally a new status / exit code / current step).

        A row left live renews its lease to ``lease_until``; a row given a final status
        releases it. A ``lost`` row stays lost (a late heartbeat does not revive it).
        """
        row = self.session.get(ProcessRow, process_id)
        if row is None:
            return None
        row.heartbeat_at = at
        if step is not None:
            row.step_json = step_to_json(step)
        if status is not None:
            row.status = status
        if exit_code is not None:
            row.exit_code = exit_code
        row.lease_expires_at = lease_until if row.status in live_statuses else None
        if row.status == "lost" and row.lost_at is None:  # declared lost by a supervisor
            row.lost_at = at
        self.session.add(row)
        self.session.flush()
        return process_from_row(row)

    @staticmethod
    def _stale(live_statuses: Sequence[str], now: datetime, stale_before: datetime) -> Any:
        """Live rows past their lease deadline (or, without a lease, heartbeat deadline)."""
        table = _PROCESS
        return sa.and_(
            table.c.status.in_(list(live_statuses)),
            sa.or_(
                sa.and_(table.c.lease_expires_at.is_not(None), table.c.lease_expires_at < now),
                sa.and_(table.c.lease_expires_at.is_(None), table.c.heartbeat_at < stale_before),
            ),
        )

    def stale_processes(
        self, live_statuses: Sequence[str], now: datetime, stale_before: datetime
    ) -> list[ProcessRecord]:
        """Live rows whose lease (or heartbeat, for rows without one) is past its deadline."""
        query = select(ProcessRow).where(self._stale(live_statuses, now, stale_before))
        return [process_from_row(row) for row in self.session.exec(query).all()]

    def mark_lost_processes(
        self,
        lost_at: dict[str, datetime],
        live_statuses: Sequence[str],
        now: datetime,
        stale_before: datetime,
    ) -> list[ProcessRecord]:
        """Set ``lost`` (since ``lost_at[id]``) on those rows that are still live and stale.

        Each row changes by one conditional UPDATE, so a heartbeat or final status that landed
        since the rows were read keeps its row.
        """
        table = _PROCESS
        stale = self._stale(live_statuses, now, stale_before)
        connection = self.session.connection()
        lost: list[ProcessRecord] = []
        for process_id, since in lost_at.items():
            marked = connection.execute(
                sa.update(table)
                .where(table.c.id == process_id, stale)
                .values(status="lost", lost_at=since, lease_expires_at=None)
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

    def processes_with_pids(self, pids: Sequence[int]) -> list[ProcessRecord]:
        """Process rows (any host, any status) whose pid is one of ``pids``."""
        if not pids:
            return []
        query = select(ProcessRow).where(col(ProcessRow.pid).in_(list(pids)))
        return [process_from_row(row) for row in self.session.exec(query).all()]
