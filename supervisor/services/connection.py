"""Whether this supervisor can reach its ledger, as the services following it find out.

Each following service (approvals, traces, processes) reports every read: a failure with
:meth:`LedgerConnection.failed`, a success with :meth:`LedgerConnection.ok`. The ledger counts
as unreachable while any of them is failing, from the first failure until all of them read
again; subscribers hear each change, so a UI can show a banner while it is down. The services
keep their cursors through the outage and read on from them once it is back, so nothing
committed meanwhile is missed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from supervisor.ledger.errors import LedgerBusy, LedgerError, LedgerUnavailable
from supervisor.services.listeners import Listeners

#: The errors that mean "try again": the server restarts, the file is locked. Anything else is
#: a real failure and ends the service's thread.
TRANSIENT = (LedgerUnavailable, LedgerBusy)
RETRY_SECONDS = 0.25
"""Pause between reads while the ledger cannot be reached."""


@dataclass(frozen=True)
class ConnectionStatus:
    """The ledger's reachability: ``down_since`` is ``None`` while it is reachable.

    Attributes:
        down_since: When the first failing read happened.
        message: What the failing read said (the ledger error's message).
        sources: The services still failing.
        outage_seconds: On the change back to reachable, how long it was down.
    """

    down_since: datetime | None = None
    message: str = ""
    sources: tuple[str, ...] = ()
    outage_seconds: float | None = None

    @property
    def connected(self) -> bool:
        """True while every service reads the ledger."""
        return self.down_since is None


ConnectionListener = Callable[[ConnectionStatus], None]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class LedgerConnection:
    """Shared by the services of one supervisor; thread-safe.

    Args:
        now: The clock (tests pass a fixed one).
    """

    def __init__(self, now: Callable[[], datetime] = _utc_now) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._failing: dict[str, str] = {}
        self._down_since: datetime | None = None
        self._listeners: Listeners[ConnectionStatus] = Listeners()

    def subscribe(self, listener: ConnectionListener) -> None:
        """Call ``listener`` (from a service thread) on each change of reachability."""
        self._listeners.subscribe(listener)

    def unsubscribe(self, listener: ConnectionListener) -> None:
        """Stop calling ``listener``."""
        self._listeners.unsubscribe(listener)

    def status(self) -> ConnectionStatus:
        """The reachability now."""
        with self._lock:
            return self._status_locked()

    def _status_locked(self, outage: float | None = None) -> ConnectionStatus:
        message = next(iter(self._failing.values()), "")
        return ConnectionStatus(self._down_since, message, tuple(self._failing), outage)

    def failed(self, source: str, error: Exception) -> None:
        """``source`` could not read the ledger."""
        message = getattr(error, "message", None) or str(error)
        with self._lock:
            changed = source not in self._failing
            self._failing[source] = message
            if self._down_since is None:
                self._down_since = self._now()
            status = self._status_locked()
        if changed:
            self._listeners.publish(status)

    def ok(self, source: str) -> None:
        """``source`` read the ledger (cheap when nothing was failing)."""
        with self._lock:
            if source not in self._failing:
                return
            del self._failing[source]
            outage: float | None = None
            if not self._failing and self._down_since is not None:
                outage = (self._now() - self._down_since).total_seconds()
                self._down_since = None
            status = self._status_locked(outage)
        self._listeners.publish(status)

    def follow(self, source: str, read: Callable[[], float], stop: threading.Event) -> None:
        """Call ``read`` until ``stop`` is set, riding out outages (a service's thread body).

        ``read`` returns how long to wait before the next read (0: at once). A transient
        failure is reported and the read tried again after :data:`RETRY_SECONDS`; any other
        error ends the loop, raised to the caller.
        """
        while not stop.is_set():
            try:
                pause = read()
            except TRANSIENT as error:
                self.failed(source, error)
                stop.wait(RETRY_SECONDS)
                continue
            self.ok(source)
            if pause > 0:
                stop.wait(pause)


class ReaderThread:
    """A service's background reader: ``read`` in :meth:`LedgerConnection.follow` on a daemon
    thread, from :meth:`start` until :meth:`stop`.

    A ledger error that is not transient ends the thread quietly (the ledger was closed, or
    refuses this reader for good); the service keeps the state it has.
    """

    def __init__(self, connection: LedgerConnection, source: str) -> None:
        self.connection = connection
        self.source = source
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, read: Callable[[], float]) -> None:
        """Follow with ``read`` (it returns the pause before its next call); once only."""
        if self._thread is not None:
            return
        self._stop.clear()

        def run() -> None:
            try:
                self.connection.follow(self.source, read, self._stop)
            except LedgerError:
                return

        self._thread = threading.Thread(target=run, name=self.source, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop following and wait (briefly) for the thread to end."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
