"""The live tool trace: the newest trace events in a bounded buffer, fed by polling the ledger.

Trace events are written without audit records, so they are followed by their id: a background
thread asks for events after the last id it has seen. On start it jumps to the tail (an
exponential then binary search over ids) so a ledger with millions of events opens instantly.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import TraceEvent
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.connection import LedgerConnection
from supervisor.services.listeners import Listeners
from supervisor.services.settings import SupervisorSettings

if TYPE_CHECKING:
    from supervisor.store.notify import ChangeProbe

_BATCH = 2_000
_MIN_READ_S = 0.05
"""The tail reads at most this often (20/s) however many appends wake it."""
MAX_TRACE_CAPACITY = 1_000_000
"""Most events a trace buffer holds, whatever the settings ask for (memory stays bounded)."""


@dataclass(frozen=True)
class TraceBatch:
    """Events appended to the buffer; ``dropped`` counts the oldest ones evicted by the cap."""

    events: tuple[TraceEvent, ...]
    dropped: int = 0


TraceListener = Callable[[TraceBatch], None]


@dataclass(frozen=True)
class TraceFilter:
    """Which events of the trace to show: one agent's (``agent_id``), or every event.

    ``label`` says in words what is shown, for the pane's title (e.g. the process selected).
    """

    agent_id: str | None = None
    label: str = "all agents"

    def matches(self, event: TraceEvent) -> bool:
        """True when ``event`` is shown under this filter."""
        return self.agent_id is None or event.agent_id == self.agent_id


ALL_EVENTS = TraceFilter()
"""The filter that shows every event."""


def filter_events(events: Iterable[TraceEvent], trace_filter: TraceFilter) -> list[TraceEvent]:
    """The events ``trace_filter`` shows, in their order."""
    if trace_filter.agent_id is None:
        return list(events)
    return [event for event in events if trace_filter.matches(event)]


class TracesService:
    """The newest ``settings.trace_capacity`` trace events, oldest first.

    The capacity is clamped to 1..``MAX_TRACE_CAPACITY``.

    Args:
        ledger: The shared ledger.
        settings: Capacity and poll interval.
        connection: Told whether each read reached the ledger (shared by the services).
    """

    def __init__(
        self,
        ledger: ApprovalLedger,
        settings: SupervisorSettings | None = None,
        *,
        connection: LedgerConnection | None = None,
    ) -> None:
        self.ledger = ledger
        self.connection = connection or LedgerConnection()
        self.settings = settings or SupervisorSettings()
        self.capacity = min(max(1, self.settings.trace_capacity), MAX_TRACE_CAPACITY)
        self._events: deque[TraceEvent] = deque(maxlen=self.capacity)
        self._lock = threading.Lock()
        self._listeners: Listeners[TraceBatch] = Listeners()
        self._after_id: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def subscribe(self, listener: TraceListener) -> None:
        """Call ``listener`` (from a background thread) with each appended batch."""
        self._listeners.subscribe(listener)

    def unsubscribe(self, listener: TraceListener) -> None:
        """Stop calling ``listener``."""
        self._listeners.unsubscribe(listener)

    def events(self) -> list[TraceEvent]:
        """A copy of the buffer, oldest first."""
        with self._lock:
            return list(self._events)

    def start(self) -> None:
        """Follow the trace in a daemon thread."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="trace-tail", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop following (returns within one poll interval)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        probe: ChangeProbe | None = None

        def read() -> float:
            nonlocal probe
            started = time.monotonic()
            batch = self.poll()
            if batch is not None and len(batch.events) >= _BATCH:
                return 0.0
            if probe is None:
                probe = self.ledger.trace_probe()
            # Wake on the next append (NOTIFY on PostgreSQL, data_version on SQLite), but read
            # at most every _MIN_READ_S however busy the ledger is, and at least every
            # poll_timeout in case a wake-up was lost.
            probe.wait(max(self.settings.poll_timeout, _MIN_READ_S))
            return max(0.0, _MIN_READ_S - (time.monotonic() - started))

        try:
            self.connection.follow("traces", read, self._stop)
        except LedgerError:
            return
        finally:
            if probe is not None:
                probe.close()

    def _last_id(self) -> int:
        """The highest trace event id (0 when empty), found with O(log n) indexed reads."""

        def exists_after(event_id: int) -> bool:
            return bool(self.ledger.trace_events(after_id=event_id, limit=1))

        if not exists_after(0):
            return 0
        low, high = 0, 1
        while exists_after(high):
            low, high = high, high * 2
        while high - low > 1:
            middle = (low + high) // 2
            if exists_after(middle):
                low = middle
            else:
                high = middle
        return high

    def poll(self) -> TraceBatch | None:
        """Read events after the last seen id, append them, publish and return the batch."""
        if self._after_id is None:
            self._after_id = max(0, self._last_id() - self.capacity)
        events = self.ledger.trace_events(after_id=self._after_id, limit=_BATCH)
        if not events:
            return None
        self._after_id = events[-1].event_id or self._after_id
        with self._lock:
            dropped = max(0, len(self._events) + len(events) - self.capacity)
            self._events.extend(events)
        batch = TraceBatch(tuple(events), dropped)
        self._listeners.publish(batch)
        return batch
