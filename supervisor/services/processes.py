"""Agents and supervised processes as one list of rows with state and heartbeat age.

Rows come from the ledger's process table (agent runs, browser workers, sandbox runs) and from
agents seen in the ledger. Each refresh first marks live rows whose heartbeat stopped as
``lost`` (``ApprovalLedger.mark_lost_processes``), so a killed process does not show as running
forever. Agents: owners of pending proposals are "waiting for approval", owners of
proposals that need reconciliation are flagged, and agents seen in the live trace are "running"
or "idle" by their last event.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import Proposal, ProposalStatus, TraceEvent
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.connection import LedgerConnection
from supervisor.services.listeners import Listeners
from supervisor.services.settings import SupervisorSettings
from supervisor.services.traces import TraceFilter

STALE_HEARTBEAT_SECONDS = 30.0


@dataclass(frozen=True)
class ProcessRow:
    """One line of the agents and processes pane."""

    key: str
    name: str
    kind: str
    state: str
    heartbeat_at: datetime | None = None
    pid: int | None = None
    host: str = ""
    exit_code: int | None = None

    def heartbeat_age(self, now: datetime) -> float | None:
        """Seconds since the last heartbeat (``None`` when unknown)."""
        if self.heartbeat_at is None:
            return None
        return max(0.0, (now - self.heartbeat_at).total_seconds())


ProcessListener = Callable[[list[ProcessRow]], None]


def trace_filter_for(row: ProcessRow) -> TraceFilter:
    """The live trace filtered to what ``row`` ran: an agent row's own events.

    A supervised process row keeps the whole trace, and the label says so rather than showing
    an empty, misleading list: the process table does not name the agent a process runs.
    """
    kind, _, name = row.key.partition(":")
    if kind == "agent":
        return TraceFilter(agent_id=name, label=f"agent {name}")
    return TraceFilter(label=f"all agents ({name} names no agent)")


def agent_rows(
    pending: Iterable[Proposal],
    reconciling: Iterable[Proposal],
    trace: Iterable[TraceEvent],
) -> list[ProcessRow]:
    """Rows for agents seen in the ledger (see the module docstring for the states)."""
    last_event: dict[str, TraceEvent] = {}
    for event in trace:
        if event.agent_id:
            last_event[event.agent_id] = event
    states: dict[str, tuple[str, datetime | None]] = {}
    for agent_id, event in last_event.items():
        finished = event.kind == "run" and event.payload.get("phase") in ("end", "finished")
        states[agent_id] = ("idle" if finished else "running", event.at)
    for proposal in pending:
        if proposal.owner:
            states[proposal.owner] = ("waiting for approval", proposal.updated_at)
    for proposal in reconciling:
        if proposal.owner:
            states[proposal.owner] = ("needs reconciliation", proposal.updated_at)
    return [
        ProcessRow(
            key=f"agent:{agent_id}", name=agent_id, kind="agent", state=state, heartbeat_at=at
        )
        for agent_id, (state, at) in sorted(states.items())
    ]


class ProcessesService:
    """Polls supervised processes and combines them with agents seen in the ledger.

    Args:
        ledger: The shared ledger.
        settings: Poll interval.
        pending: Returns the current pending proposals (e.g. ``ApprovalsService.pending``).
        trace: Returns recent trace events (e.g. ``TracesService.events``).
        connection: Told whether each refresh reached the ledger (shared by the services).
    """

    def __init__(
        self,
        ledger: ApprovalLedger,
        settings: SupervisorSettings | None = None,
        *,
        pending: Callable[[], list[Proposal]] | None = None,
        trace: Callable[[], list[TraceEvent]] | None = None,
        connection: LedgerConnection | None = None,
    ) -> None:
        self.ledger = ledger
        self.connection = connection or LedgerConnection()
        self.settings = settings or SupervisorSettings()
        self._pending = pending or (lambda: [])
        self._trace = trace or (lambda: [])
        self._lock = threading.Lock()
        self._listeners: Listeners[list[ProcessRow]] = Listeners()
        self._rows: list[ProcessRow] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def subscribe(self, listener: ProcessListener) -> None:
        """Call ``listener`` (from a background thread) with the rows after each refresh."""
        self._listeners.subscribe(listener)

    def unsubscribe(self, listener: ProcessListener) -> None:
        """Stop calling ``listener``."""
        self._listeners.unsubscribe(listener)

    def rows(self) -> list[ProcessRow]:
        """The rows of the last refresh."""
        with self._lock:
            return list(self._rows)

    def refresh(self) -> list[ProcessRow]:
        """Mark stale processes lost, re-read processes and agents, publish and return the rows."""
        with contextlib.suppress(LedgerError):  # a read-only ledger is still listed
            self.ledger.mark_lost_processes()
        rows = [
            ProcessRow(
                key=f"process:{process.process_id}",
                name=process.command or process.process_id,
                kind=process.kind,
                state=(
                    f"exited {process.exit_code}"
                    if process.exit_code is not None
                    else process.status
                ),
                heartbeat_at=process.heartbeat_at,
                pid=process.pid,
                host=process.host,
                exit_code=process.exit_code,
            )
            for process in self.ledger.list_processes()
        ]
        reconciling = self.ledger.list(status=ProposalStatus.NEEDS_RECONCILIATION, limit=200).items
        rows.extend(agent_rows(self._pending(), reconciling, self._trace()))
        with self._lock:
            self._rows = rows
        self._listeners.publish(rows)
        return rows

    def start(self, interval: float = 1.0) -> None:
        """Refresh every ``interval`` seconds in a daemon thread."""
        if self._thread is not None:
            return
        self._stop.clear()

        def read() -> float:
            self.refresh()
            return interval

        def run() -> None:
            try:
                self.connection.follow("processes", read, self._stop)
            except LedgerError:
                return

        self._thread = threading.Thread(target=run, name="processes", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop refreshing."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
