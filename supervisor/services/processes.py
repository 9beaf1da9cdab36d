"""Agents and supervised processes as one list of rows with state and heartbeat age.

Rows come from the ledger's process table (agent runs, browser workers, sandbox runs) and from
agents seen in the ledger. Each refresh first marks live rows whose lease ran out as ``lost``
(``ApprovalLedger.mark_lost_processes``), so a killed process does not show as running forever;
a lost row says since when (``lost since 13:45:02``), and a row whose lease ran out on a ledger
this supervisor cannot write shows the same. Agents: owners of pending proposals are "waiting
for approval" (or "orphaned" when every process waiting on them is gone), owners of proposals
that need reconciliation are flagged, and agents seen in the live trace are "running" until
their run's last event says it completed, failed or paused.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass
from datetime import datetime

from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import (
    LIVE_PROCESS_STATUSES,
    ProcessRecord,
    ProcessStep,
    Proposal,
    ProposalStatus,
    TraceEvent,
)
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.connection import LedgerConnection, ReaderThread
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
    lost_at: datetime | None = None
    step: ProcessStep | None = None
    log_path: str | None = None

    def doing(self, now: datetime) -> str:
        """What the process is doing now, with elapsed time and progress (``-``: unknown)."""
        if self.step is None or self.state not in LIVE_PROCESS_STATUSES:
            return "-"
        return step_text(self.step, now)

    def heartbeat_age(self, now: datetime) -> float | None:
        """Seconds since the last heartbeat (``None`` when unknown)."""
        if self.heartbeat_at is None:
            return None
        return max(0.0, (now - self.heartbeat_at).total_seconds())


ProcessListener = Callable[[list[ProcessRow]], None]


#: ``run`` trace outcomes after which an agent is no longer running a turn.
_RUN_ENDED = {"awaiting_approval": "waiting for approval"}


_BAR_CELLS = 8
_URL_CHARS = 40


def elapsed_text(seconds: float) -> str:
    """``7s``, ``2m05s``, ``1h03m``."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def size_text(count: int) -> str:
    """``512 B``, ``12.3 kB``, ``4.1 MB``."""
    if count < 1000:
        return f"{count} B"
    if count < 1_000_000:
        return f"{count / 1000:.1f} kB"
    return f"{count / 1_000_000:.1f} MB"


def progress_bar(fraction: float) -> str:
    """``▰▰▰▱▱▱▱▱`` for ``fraction`` of the work done (clamped to 0..1)."""
    filled = round(min(max(fraction, 0.0), 1.0) * _BAR_CELLS)
    return "▰" * filled + "▱" * (_BAR_CELLS - filled)


def step_text(step: ProcessStep, now: datetime) -> str:
    """One line for a process's current step (the detail is untrusted: escape when drawing).

    ``model gpt-4o-mini 3s`` · ``tool create_customer 1s`` · ``waiting for approval
    (create_customer) 2m05s`` · ``step 3/20 ▰▱▱▱▱▱▱▱ https://...`` · ``run 7s/30s ▰▰▱▱▱▱▱▱
    12.3 kB``; a kind this release does not know is shown as written.
    """
    elapsed_s = (now - step.since).total_seconds()
    elapsed = elapsed_text(elapsed_s)
    if step.kind == "model_call":
        return f"model {step.detail} {elapsed}"
    if step.kind == "tool_call":
        return f"tool {step.detail} {elapsed}"
    if step.kind == "waiting_for_approval":
        return f"waiting for approval ({step.detail}) {elapsed}"
    if step.kind == "browser_step" and step.done is not None:
        url = step.detail if len(step.detail) <= _URL_CHARS else step.detail[: _URL_CHARS - 1] + "…"
        if step.total:
            return f"step {step.done}/{step.total} {progress_bar(step.done / step.total)} {url}"
        return f"step {step.done} {url}"
    if step.kind == "sandbox_run":
        size = size_text(step.output_bytes or 0)
        if step.limit_seconds:
            limit = elapsed_text(step.limit_seconds)
            bar = progress_bar(elapsed_s / step.limit_seconds)
            return f"run {elapsed}/{limit} {bar} {size}"
        return f"run {elapsed} {size}"
    return f"{step.kind} {step.detail} {elapsed}".strip()


def lost_state(since: datetime) -> str:
    """``lost since 13:45:02`` (local time of the lease deadline that passed)."""
    return f"lost since {since.astimezone():%H:%M:%S}"


def process_state(process: ProcessRecord, now: datetime) -> tuple[str, datetime | None]:
    """The state shown for a process row and, for a lost one, since when."""
    if process.exit_code is not None:  # "stopped 143" for a run the operator stopped
        ended = "stopped" if process.status == "stopped" else "exited"
        return f"{ended} {process.exit_code}", None
    if process.status == "lost":
        since = process.lost_at or process.heartbeat_at
        return lost_state(since), since
    if process.lease_expires_at is not None and not process.alive_at(now):
        return lost_state(process.lease_expires_at), process.lease_expires_at
    return process.status, None


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
    orphaned: Set[str] = frozenset(),
) -> list[ProcessRow]:
    """Rows for agents seen in the ledger (see the module docstring for the states)."""
    last_event: dict[str, TraceEvent] = {}
    for event in trace:
        if event.agent_id:
            last_event[event.agent_id] = event
    states: dict[str, tuple[str, datetime | None]] = {}
    for agent_id, event in last_event.items():
        state = "running"
        if event.kind == "run" and event.payload.get("phase") in ("end", "finished"):
            state = "idle"
        elif event.kind == "run" and event.outcome_status not in (None, "started"):
            state = _RUN_ENDED.get(event.outcome_status, "idle")
        states[agent_id] = (state, event.at)
    waiting: dict[str, list[Proposal]] = {}
    for proposal in pending:
        if proposal.owner:
            waiting.setdefault(proposal.owner, []).append(proposal)
    for owner, proposals in waiting.items():
        gone = all(proposal.proposal_id in orphaned for proposal in proposals)
        state = "orphaned (waiting process gone)" if gone else "waiting for approval"
        states[owner] = (state, max(proposal.updated_at for proposal in proposals))
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
        self._reader = ReaderThread(self.connection, "processes")

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
        now = self.settings.now()
        rows: list[ProcessRow] = []
        for process in self.ledger.list_processes():
            state, lost_at = process_state(process, now)
            rows.append(
                ProcessRow(
                    key=f"process:{process.process_id}",
                    name=process.command or process.process_id,
                    kind=process.kind,
                    state=state,
                    heartbeat_at=process.heartbeat_at,
                    pid=process.pid,
                    host=process.host,
                    exit_code=process.exit_code,
                    lost_at=lost_at,
                    step=process.step,
                    log_path=process.log_path,
                )
            )
        reconciling = self.ledger.list(status=ProposalStatus.NEEDS_RECONCILIATION, limit=200).items
        pending = self._pending()
        orphaned = set(self.ledger.orphans(pending))
        rows.extend(agent_rows(pending, reconciling, self._trace(), orphaned))
        with self._lock:
            self._rows = rows
        self._listeners.publish(rows)
        return rows

    def start(self, interval: float = 1.0) -> None:
        """Refresh every ``interval`` seconds in a daemon thread."""

        def read() -> float:
            self.refresh()
            return interval

        self._reader.start(read)

    def stop(self) -> None:
        """Stop refreshing."""
        self._reader.stop()
