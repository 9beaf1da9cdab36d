"""Run events and the sinks they go to: the ledger (trace + process table) and callbacks."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from supervisor.ledger.models import Blob, ProcessRecord, ProcessStep, TraceEvent

EventKind = Literal["sandbox.started", "sandbox.heartbeat", "sandbox.finished", "sandbox.refused"]


class RunEvent(BaseModel):
    """Something that happened to a sandbox run.

    Attributes:
        kind: started, heartbeat, finished, or refused (isolation unavailable).
        run_id: The run.
        process_id: Its process record.
        backend: Backend name.
        at: When (UTC).
        pid: Host pid of the run's process group leader (local backend).
        host: Host name.
        command: One-line description.
        actor: Who asked (``agent`` through a governed tool, ``operator`` from the CLI).
        status: Process status for the process table (running, exited, failed, killed...).
        exit_code: Exit status once finished.
        payload: Details for the trace (digest, limits, totals, blob pointers).
    """

    model_config = ConfigDict(frozen=True)

    kind: EventKind
    run_id: str
    process_id: str
    backend: str
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    pid: int | None = None
    host: str = Field(default_factory=socket.gethostname)
    command: str = ""
    actor: str = "agent"
    status: str = "running"
    exit_code: int | None = None
    payload: dict[str, Any] = Field(default_factory=dict)


class RunSink(Protocol):
    """Receives every event of every run of a sandbox (heartbeats from a background thread)."""

    def emit(self, event: RunEvent) -> None:
        """Record or forward one event."""


class RunLedger(Protocol):
    """The part of the approval ledger a sandbox uses."""

    def upsert_process(self, process: ProcessRecord) -> ProcessRecord: ...

    def heartbeat(
        self,
        process_id: str,
        *,
        status: str | None = None,
        exit_code: int | None = None,
        step: ProcessStep | None = None,
    ) -> ProcessRecord | None: ...

    def append_trace(self, events: Iterable[TraceEvent]) -> int: ...

    def put_blob(self, content: bytes, media_type: str = ...) -> Blob: ...

    def list_processes(self, status: str | None = None) -> list[ProcessRecord]: ...

    def mark_lost_processes(self, now: datetime | None = None) -> list[ProcessRecord]: ...


class LedgerSink:
    """Writes runs to the ledger: a process record the TUI lists, and trace events.

    Args:
        ledger: The ledger (``SQLModelProvider(url).ledger``).
        agent_id: Agent to attribute the trace events to, if any.
        thread_id: Thread to attribute them to, if any.
    """

    def __init__(
        self, ledger: RunLedger, *, agent_id: str | None = None, thread_id: str | None = None
    ) -> None:
        self.ledger = ledger
        self.agent_id = agent_id
        self.thread_id = thread_id
        self._started_at: dict[str, datetime] = {}

    def emit(self, event: RunEvent) -> None:
        """Upsert the process record, refresh its heartbeat, append a trace event."""
        started_at = self._started_at.setdefault(event.process_id, event.at)
        step = ProcessStep(
            kind="sandbox_run", detail=event.command, since=started_at,
            output_bytes=event.payload.get("output_bytes", 0),
            limit_seconds=event.payload.get("timeout_seconds"),
        )  # fmt: skip
        if event.kind == "sandbox.heartbeat":
            self.ledger.heartbeat(event.process_id, step=step)
            return
        if event.kind == "sandbox.finished":
            self._started_at.pop(event.process_id, None)
        self.ledger.upsert_process(
            ProcessRecord(
                process_id=event.process_id,
                kind=f"sandbox.{event.backend}",
                pid=event.pid,
                host=event.host,
                command=event.command,
                status=event.status,
                started_at=started_at,
                heartbeat_at=event.at,
                exit_code=event.exit_code,
                step=step if event.kind == "sandbox.started" else None,
            )
        )
        self.ledger.append_trace(
            [
                TraceEvent(
                    at=event.at,
                    agent_id=self.agent_id,
                    thread_id=self.thread_id,
                    run_id=event.run_id,
                    kind=event.kind,
                    tool=f"sandbox.{event.backend}",
                    outcome_status=event.status if event.kind != "sandbox.started" else None,
                    payload={
                        "process_id": event.process_id,
                        "actor": event.actor,
                        "command": event.command,
                        "pid": event.pid,
                        "host": event.host,
                        "exit_code": event.exit_code,
                        **event.payload,
                    },
                )
            ]
        )


class CallbackSink:
    """Calls a function with every event (UI bridges, tests)."""

    def __init__(self, callback: Callable[[RunEvent], None]) -> None:
        self.callback = callback

    def emit(self, event: RunEvent) -> None:
        """Forward the event."""
        self.callback(event)
