"""Ledger services for what is registered: tools, saved agents and supervised processes
(with the lease, renewed by the heartbeat, whose deadline marks a silent one ``lost``)."""

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
    ProcessStep,
    ToolRecord,
)

_RESTART_FACTORY = "restart_factory"  # AgentConfig.restart_factory, as saved


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
        """Save an agent's configuration (JSON only).

        A configuration without a restart factory keeps the one stored for the agent: a process
        that builds and saves the agent again (``build_and_save()``, then ``record_restart``)
        would otherwise leave it without one for a moment, and a resume of its earlier run's
        orphan in that moment found the agent not resumable.
        """
        normalised: dict[str, Any] = normalise(config)
        with self.repository.write() as tx:
            if normalised.get(_RESTART_FACTORY) is None:
                stored = tx.agent(agent_id)
                factory = stored.config.get(_RESTART_FACTORY) if stored is not None else None
                if factory is not None:
                    normalised = {**normalised, _RESTART_FACTORY: factory}
            agent = AgentRecord(
                agent_id=agent_id, name=name, config=normalised, updated_at=self._now()
            )
            tx.save_agent(agent)
        return agent

    def load_agent(self, agent_id: str) -> AgentRecord | None:
        """An agent's saved configuration, or ``None``."""
        with self.repository.read() as tx:
            return tx.agent(agent_id)

    def upsert_process(self, process: ProcessRecord) -> ProcessRecord:
        """Record a supervised process (insert or replace by id).

        A live process holds a lease until its heartbeat plus :attr:`lease_seconds` (unless the
        record names its own deadline); a final status releases it.
        """
        if process.status in LIVE_PROCESS_STATUSES:
            if process.lease_expires_at is None:
                deadline = process.heartbeat_at + timedelta(seconds=self.lease_seconds)
                process = process.model_copy(update={"lease_expires_at": deadline})
        elif process.lease_expires_at is not None:
            process = process.model_copy(update={"lease_expires_at": None})
        with self.repository.write() as tx:
            tx.upsert_process(process)
        return process

    def heartbeat(
        self,
        process_id: str,
        *,
        status: str | None = None,
        exit_code: int | None = None,
        step: ProcessStep | None = None,
    ) -> ProcessRecord | None:
        """Refresh a process's heartbeat and lease (optionally its status, exit code and what
        it is doing now, ``step``).

        A final status (anything but running / waiting for approval) releases the lease at
        once, so whoever waits on the process's proposals sees it gone without a deadline.
        """
        now = self._now()
        lease_until = now + timedelta(seconds=self.lease_seconds)
        with self.repository.write() as tx:
            return tx.touch_process(
                process_id, now, status, exit_code,
                live_statuses=LIVE_PROCESS_STATUSES, lease_until=lease_until, step=step,
            )  # fmt: skip

    def mark_lost_processes(self, now: datetime | None = None) -> list[ProcessRecord]:
        """Mark live processes whose lease is past its deadline as ``lost``.

        A process that dies without saying so (SIGKILL, a host crash) leaves its row live
        forever; its lease running out is the only sign. A row still ``running`` (or waiting
        for approval) whose lease deadline has passed becomes ``lost`` since that deadline; a
        row without a lease (written by an older version) is lost when its heartbeat is older
        than :data:`LOST_AFTER_SECONDS`. Later heartbeats do not revive it; a final status
        written by the process still lands.

        Args:
            now: The current time (default: the ledger's clock).

        Returns:
            The rows marked now.
        """
        now = now or self._now()
        stale_before = now - timedelta(seconds=LOST_AFTER_SECONDS)
        with self.repository.read() as tx:  # the common case writes nothing, takes no lock
            stale = tx.stale_processes(LIVE_PROCESS_STATUSES, now, stale_before)
        if not stale:
            return []
        lost_at = {
            process.process_id: process.lease_expires_at
            or process.heartbeat_at + timedelta(seconds=LOST_AFTER_SECONDS)
            for process in stale
        }
        with self.repository.write() as tx:
            return tx.mark_lost_processes(lost_at, LIVE_PROCESS_STATUSES, now, stale_before)

    def list_processes(self, status: str | None = None) -> list[ProcessRecord]:
        """Supervised processes, newest first."""
        with self.repository.read() as tx:
            return tx.processes(status)
