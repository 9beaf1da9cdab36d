"""Ledger services for what is registered: tools, saved agents and supervised processes
(with the heartbeat deadline that marks a silent one ``lost``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from supervisor.canonical import normalise
from supervisor.ledger.base import LedgerBase
from supervisor.ledger.models import (
    LIVE_PROCESS_STATUSES,
    LOST_AFTER_SECONDS,
    AgentRecord,
    ProcessRecord,
    ToolRecord,
)


class RegistryServiceMixin(LedgerBase):
    """The tool registry, agent configurations and the process table."""

    def upsert_tool(self, tool: ToolRecord) -> ToolRecord:
        """Register or update a tool by its stable handle."""
        with self.repository.write() as tx:
            tx.upsert_tool(tool, self._now())
        return tool

    def get_tool(self, handle: str) -> ToolRecord | None:
        """A registered tool by handle, or ``None``."""
        with self.repository.read() as tx:
            return tx.tool(handle)

    def list_tools(self, agent_id: str | None = None) -> list[ToolRecord]:
        """Registered tools, optionally of one agent."""
        with self.repository.read() as tx:
            return tx.tools(agent_id)

    def save_agent(self, agent_id: str, name: str, config: dict[str, Any]) -> AgentRecord:
        """Save an agent's configuration (JSON only)."""
        normalised: dict[str, Any] = normalise(config)
        agent = AgentRecord(agent_id=agent_id, name=name, config=normalised, updated_at=self._now())
        with self.repository.write() as tx:
            tx.save_agent(agent)
        return agent

    def load_agent(self, agent_id: str) -> AgentRecord | None:
        """An agent's saved configuration, or ``None``."""
        with self.repository.read() as tx:
            return tx.agent(agent_id)

    def upsert_process(self, process: ProcessRecord) -> ProcessRecord:
        """Record a supervised process (insert or replace by id)."""
        with self.repository.write() as tx:
            tx.upsert_process(process)
        return process

    def heartbeat(
        self, process_id: str, *, status: str | None = None, exit_code: int | None = None
    ) -> ProcessRecord | None:
        """Refresh a process's heartbeat (optionally its status and exit code)."""
        with self.repository.write() as tx:
            return tx.touch_process(process_id, self._now(), status, exit_code)

    def mark_lost_processes(self, now: datetime | None = None) -> list[ProcessRecord]:
        """Mark live processes whose heartbeat is past its deadline as ``lost``.

        A process that dies without saying so (SIGKILL, a host crash) leaves its row live
        forever; its heartbeat stopping is the only sign. A row still ``running`` (or waiting
        for approval) whose heartbeat is older than :data:`LOST_AFTER_SECONDS` becomes ``lost``.
        Later heartbeats do not revive it; a final status written by the process still lands.

        Args:
            now: The current time (default: the ledger's clock).

        Returns:
            The rows marked now.
        """
        stale_before = (now or self._now()) - timedelta(seconds=LOST_AFTER_SECONDS)
        with self.repository.read() as tx:  # the common case writes nothing, takes no lock
            stale = tx.stale_processes(LIVE_PROCESS_STATUSES, stale_before)
        if not stale:
            return []
        with self.repository.write() as tx:
            return tx.mark_lost_processes(stale, LIVE_PROCESS_STATUSES, stale_before)

    def list_processes(self, status: str | None = None) -> list[ProcessRecord]:
        """Supervised processes, newest first."""
        with self.repository.read() as tx:
            return tx.processes(status)
