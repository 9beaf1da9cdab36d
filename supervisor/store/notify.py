"""Change probes: cheap ways to learn that another connection committed.

SQLite: ``PRAGMA data_version`` on a dedicated connection changes whenever any other connection
(in any process) commits; it is polled every 20 ms. PostgreSQL: ``LISTEN`` on a dedicated
autocommit psycopg connection; writers ``NOTIFY`` in the same transaction as the change. Callers
re-read by cursor after every wake-up and also on a timer, so a lost notification only delays.

Driver errors on the probe's own connection (SQLAlchemy does not see it) are translated like
every other ledger call, into ``LedgerUnavailable`` / ``LedgerBusy``. A PostgreSQL probe whose
connection was lost (a server restart) reconnects on its next ``wait`` and reports a possible
change, since notifications sent meanwhile are gone.

Each audited record's notification names it (:func:`notice_payload`), so a follower that cares
about a few subjects or actions (a waiter for one proposal's decision) can skip the wake-ups
for everything else: :class:`ChangeBoard` shares one probe between a process's threads and
lets each wait for the notices it cares about. SQLite's probe cannot say what changed, so
there every change matches.

Each proposal action's notices also go to a channel of their own (:func:`notice_channel`), so
a process whose followers care about a few actions (an approver about proposals, a waiter for
a decision about decisions) is not even sent the others: on a busy team ledger most notices
are other actions, and hearing one costs a follower a wake-up. The board listens on what its
followers need (:func:`channels_for`), always with :data:`CHANNEL`, which carries every other
action.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator
from typing import Any, Protocol

from sqlalchemy.engine import Engine

from supervisor.store.errors import classify_driver_error

CHANNEL = "supervisor_ledger"
"""Audited writes of actions not in :data:`ROUTED_ACTIONS` notify this channel, once per audit
record (:func:`notice_payload`); every board listens on it."""
ROUTED_ACTIONS = frozenset({
    "propose", "approve", "approve_vote", "reject", "cancel", "revoke", "edit", "extend",
    "expire", "claim", "claim_refused", "complete", "fail", "needs_reconciliation", "reconcile",
})  # fmt: skip
"""The proposal actions whose notices go to a channel of their own (:func:`notice_channel`)."""
TRACE_CHANNEL = "supervisor_trace"
"""Transactions that append trace events notify this channel (live tails wake on it)."""
SQLITE_POLL_S = 0.02
_MAX_PAYLOAD = 7000
"""PostgreSQL refuses NOTIFY payloads of 8000 bytes or more; longer notices name no record."""
_BOARD_SIZE = 4096
IDLE_RELEASE_S = 10.0
"""A change board nobody has waited on for this long closes its listening connection (the next
wait opens one again): PostgreSQL signals every listening connection of the database at each
commit that notifies, so a process that stopped following should not stay among them."""

Notice = tuple[str, str] | None
"""What a notification names: ``(action, subject)``, or ``None`` when it could be anything."""
Interest = Callable[[str, str], bool]
"""``interest(action, subject)``: whether a notice about that record should end a wait."""


def notice_channel(action: str) -> str:
    """The channel a record with this action notifies: ``supervisor_ledger_<action>`` for the
    :data:`ROUTED_ACTIONS`, :data:`CHANNEL` for any other."""
    return f"{CHANNEL}_{action}" if action in ROUTED_ACTIONS else CHANNEL


ALL_CHANNELS = frozenset({CHANNEL} | {notice_channel(action) for action in ROUTED_ACTIONS})
"""Every channel an audited write may notify."""


def channels_for(actions: Collection[str] | None) -> frozenset[str]:
    """The channels that carry every notice about ``actions`` (``None``: any action).

    :data:`CHANNEL` is always among them: it carries the actions that have no channel of their
    own, and whatever a writer of an earlier version sends."""
    if actions is None:
        return ALL_CHANNELS
    return frozenset({CHANNEL} | {notice_channel(action) for action in actions})


def notice_payload(seq: int, action: str, subject: str) -> str:
    """The NOTIFY payload for one audit record: ``[seq, action, subject]`` as JSON (the seq
    alone if that would be too long for a notification)."""
    payload = json.dumps([seq, action, subject], separators=(",", ":"))
    return payload if len(payload.encode()) <= _MAX_PAYLOAD else json.dumps([seq])


def parse_notice(payload: str) -> Notice:
    """The record a notification names, ``None`` if it names none (any change may be it)."""
    try:
        value = json.loads(payload)
    except ValueError:
        return None
    if isinstance(value, list) and len(value) == 3:
        action, subject = value[1], value[2]
        if isinstance(action, str) and isinstance(subject, str):
            return action, subject
    return None


class ChangeProbe(Protocol):
    """Blocks until another connection may have committed, or a timeout passes."""

    holds_server: bool
    """Whether the probe holds something of a server's while idle (:meth:`release` frees it)."""

    def wait(self, timeout: float) -> bool:
        """Return ``True`` if something may have changed since the previous call."""
        ...

    def notices(self, timeout: float) -> list[Notice]:
        """Like :meth:`wait`, but say what changed: every notice received (empty on timeout or
        :meth:`wake`)."""
        ...

    def hears(self, channels: frozenset[str]) -> bool:
        """Whether every notice sent to ``channels`` reaches this probe."""
        ...

    def listen(self, channels: Collection[str]) -> None:
        """Hear ``channels`` too from now on (what was sent to them before is not heard)."""
        ...

    def wake(self) -> None:
        """End a :meth:`notices` running in another thread now (it returns what it has)."""
        ...

    def release(self) -> None:
        """Give the dedicated connection up while nobody waits; the next wait takes one again
        (and reports a possible change, as whatever was sent meanwhile was not heard)."""
        ...

    def close(self) -> None:
        """Release the dedicated connection."""
        ...


class SqliteDataVersionProbe:
    """Polls ``PRAGMA data_version`` on one connection held for the probe's lifetime."""

    holds_server = False

    def __init__(self, engine: Engine) -> None:
        self._connection: Any = engine.raw_connection()
        self._lock = threading.Lock()
        self._last = self._version()

    def _version(self) -> int:
        import sqlite3

        try:
            cursor = self._connection.cursor()
            try:
                cursor.execute("PRAGMA data_version")
                return int(cursor.fetchone()[0])
            finally:
                cursor.close()
        except sqlite3.Error as error:
            raise classify_driver_error(error) from error

    def wait(self, timeout: float) -> bool:
        """Poll until the data version moves or ``timeout`` seconds pass."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._lock:
            while True:
                current = self._version()
                if current != self._last:
                    self._last = current
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                time.sleep(min(SQLITE_POLL_S, remaining))

    def notices(self, timeout: float) -> list[Notice]:
        """One notice naming no record when the data version moved (SQLite cannot say more)."""
        return [None] if self.wait(timeout) else []

    def hears(self, channels: frozenset[str]) -> bool:
        """Always: every commit moves the data version."""
        return True

    def listen(self, channels: Collection[str]) -> None:
        """Nothing to do: SQLite has no channels."""

    def wake(self) -> None:
        """Nothing to do: a wait polls every 20 ms."""

    def release(self) -> None:
        """Nothing to do: polling a local file costs no server anything."""

    def close(self) -> None:
        """Return the connection to the pool."""
        self._connection.close()


class Waker:
    """A pipe a wait watches with its socket, so another thread can end the wait at once.

    (Closing the socket under a running ``epoll`` wait would not end it: the closed
    descriptor's wake-up is dropped and the wait sleeps on.)"""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pipe: tuple[int, int] | None = None

    def open(self, selector: selectors.BaseSelector) -> None:
        """A fresh pipe, watched by ``selector`` (the previous one is closed)."""
        pipe = os.pipe()
        for end in pipe:
            os.set_blocking(end, False)
        selector.register(pipe[0], selectors.EVENT_READ, "wake")
        with self._lock:
            old, self._pipe = self._pipe, pipe
        _close_pipe(old)

    def wake(self) -> None:
        """Make the pipe readable (a no-op once closed)."""
        with self._lock:
            if self._pipe is not None:
                try:
                    os.write(self._pipe[1], b"\0")
                except BlockingIOError:  # full: a wake-up is pending already
                    pass

    def drain(self) -> None:
        """Empty the pipe after a wake-up."""
        with self._lock:
            if self._pipe is not None:
                try:
                    while os.read(self._pipe[0], 512):
                        pass
                except BlockingIOError:
                    pass

    def close(self) -> None:
        """Close the pipe (its selector is closed by its owner)."""
        with self._lock:
            old, self._pipe = self._pipe, None
        _close_pipe(old)


def _close_pipe(pipe: tuple[int, int] | None) -> None:
    if pipe is not None:
        for end in pipe:
            os.close(end)


class TurnLock:
    """The lock of a probe's connection: a wait holds it while it blocks reading, and whoever
    else needs the connection wakes the wait and goes next.

    The gate makes that turn stick: a plain lock is not fair, so a reader that loops straight
    back to the connection (the feed relay's) could take it again before the thread that woke
    it, for as long as notices keep coming, and starve a ``LISTEN``.
    """

    def __init__(self) -> None:
        self._gate = threading.Lock()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the connection for a wait (behind anyone who asked for it first)."""
        with self._gate:
            self._lock.acquire()
        try:
            yield
        finally:
            self._lock.release()

    @contextlib.contextmanager
    def taken(self, wake: Callable[[], None]) -> Iterator[None]:
        """Hold the connection now: a wait holding it is woken (``wake``) to give it up."""
        with self._gate:
            if not self._lock.acquire(blocking=False):
                wake()
                self._lock.acquire()
        try:
            yield
        finally:
            self._lock.release()


def woken(ready: list[tuple[selectors.SelectorKey, int]]) -> bool:
    """Whether a :class:`Waker`'s pipe is among what ``selector.select`` found ready."""
    return any(key.data == "wake" for key, _ in ready)


class PostgresListenProbe:
    """``LISTEN`` on a dedicated autocommit connection, re-established after a lost one.

    The notifications are read from libpq directly (wait for the socket, ``consume_input``,
    ``notifies``), not through psycopg's ``Connection.notifies`` generator: a follower on a
    busy team ledger hears every audited write of every process, hundreds a second, and the
    generator's Python per notification cost several times what the follower then does with
    it. Nothing else runs on this connection but its ``LISTEN`` statements.

    A :class:`Waker` watched with the socket lets :meth:`wake` and :meth:`close` end a wait
    running in another thread at once.
    """

    holds_server = True

    def __init__(self, engine: Engine, channels: str | Collection[str] = CHANNEL) -> None:
        self._dsn = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._channels = checked_channels(channels)
        self._lock = TurnLock()
        self._waker = Waker()
        self._connection: Any = None
        self._selector: selectors.BaseSelector | None = None
        self._backlog: list[tuple[str, str]] = []
        self._encoding = "utf-8"
        self._connect()

    @property
    def channels(self) -> frozenset[str]:
        """The channels listened on."""
        return self._channels

    def _connect(self) -> None:
        import psycopg  # only PostgreSQL ledgers pay for the import

        connection = None
        try:
            connection = psycopg.connect(self._dsn, autocommit=True, connect_timeout=10)
            connection.execute(_listen_statement(self._channels))
            # What psycopg itself read while running the LISTEN, before this probe reads
            # libpq. The server may close the connection here too (a restart): that is the
            # same typed, transient error, or a reader thread would die of it.
            backlog = self._drained(connection)
        except psycopg.Error as error:
            if connection is not None:
                connection.close()
            raise classify_driver_error(error) from error
        self._backlog = backlog
        selector = selectors.DefaultSelector()
        selector.register(connection.pgconn.socket, selectors.EVENT_READ, "socket")
        self._waker.open(selector)
        self._connection, self._selector = connection, selector
        self._encoding = connection.info.encoding

    @staticmethod
    def _drained(connection: Any) -> list[tuple[str, str]]:
        """What psycopg read itself while running a statement on ``connection``."""
        return [(n.channel, n.payload) for n in connection.notifies(timeout=0)]

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        selector, self._selector = self._selector, None
        self._waker.close()
        if selector is not None:
            selector.close()
        if connection is not None:
            connection.close()

    def hears(self, channels: frozenset[str]) -> bool:
        """Whether this probe listens on every one of ``channels``."""
        return channels <= self._channels

    def listen(self, channels: Collection[str]) -> None:
        """``LISTEN`` on ``channels`` too (on a lost connection: when it is made again).

        Raises:
            ValueError: A channel's name is not a lowercase identifier.
            LedgerUnavailable: The server cannot be reached (the next call reconnects).
        """
        import psycopg

        new = checked_channels(channels) - self._channels
        if not new:
            return
        with self._taken():
            connection = self._connection
            if connection is not None and not connection.closed:
                try:
                    connection.execute(_listen_statement(new))
                except psycopg.Error as error:
                    self._drop()
                    raise classify_driver_error(error) from error
                self._backlog += self._drained(connection)
            self._channels |= new

    def wake(self) -> None:
        """End a :meth:`notices` running in another thread now; it returns what it has."""
        self._waker.wake()

    def wait(self, timeout: float) -> bool:
        """Wait for one notification or ``timeout`` seconds; drain any others queued.

        Raises:
            LedgerUnavailable: The server cannot be reached (the next call reconnects).
        """
        return bool(self.notices(timeout))

    def notices(self, timeout: float) -> list[Notice]:
        """Wait for one notification or ``timeout`` seconds; return it and any others queued.

        Raises:
            LedgerUnavailable: The server cannot be reached (the next call reconnects).
        """
        received = self.notifications(timeout)
        return [None] if received is None else [parse_notice(payload) for _, payload in received]

    def notifications(self, timeout: float) -> list[tuple[str, str]] | None:
        """:meth:`notices` as they came, ``(channel, payload)``; ``None`` when the connection
        was made again (whatever was sent meanwhile is lost: re-read).

        Raises:
            LedgerUnavailable: The server cannot be reached (the next call reconnects).
        """
        import psycopg

        with self._lock.reading():
            if self._connection is None or self._connection.closed:
                self._drop()
                self._connect()
                return None
            try:
                return self._received(max(timeout, 0.0))
            except psycopg.Error as error:
                self._drop()
                raise classify_driver_error(error) from error

    def _received(self, timeout: float) -> list[tuple[str, str]]:
        """What libpq has parsed or the socket brings within ``timeout`` seconds.

        Raises:
            psycopg.Error: The connection failed (libpq could not read from it).
        """
        import psycopg

        connection, selector = self._connection, self._selector
        if connection is None or selector is None:  # only notifications() calls this, connected
            raise psycopg.OperationalError("the listening connection was closed")
        pgconn = connection.pgconn
        received, self._backlog = self._backlog + self._parsed(pgconn), []
        deadline = time.monotonic() + timeout
        while not received:
            remaining = deadline - time.monotonic()
            try:
                ready = remaining > 0 and selector.select(remaining)
            except OSError as error:
                raise psycopg.OperationalError("the listening connection failed") from error
            if not ready:
                return received
            if woken(ready):
                self._waker.drain()  # wake() from another thread: give the connection up now
                return received + self._parsed(pgconn)
            pgconn.consume_input()  # raises if the connection is lost
            if pgconn.status != psycopg.pq.ConnStatus.OK:
                raise psycopg.OperationalError("the listening connection was lost")
            received = self._parsed(pgconn)
        return received

    def _parsed(self, pgconn: Any) -> list[tuple[str, str]]:
        """The notifications libpq has already read, in the order they came."""
        received: list[tuple[str, str]] = []
        while (notify := pgconn.notifies()) is not None:
            encoding = self._encoding
            received.append((notify.relname.decode(encoding), notify.extra.decode(encoding)))
        return received

    def _taken(self) -> contextlib.AbstractContextManager[None]:
        """The connection's lock, taken at once: a wait running in another thread is woken to
        give it up (closing the connection under it would not end it, see :class:`Waker`)."""
        return self._lock.taken(self.wake)

    def close(self) -> None:
        """Close the listening connection. A ``wait`` in another thread ends at once (with
        what it has), and a later one listens on a new connection."""
        with self._taken():
            self._drop()

    def release(self) -> None:
        """:meth:`close`: the next wait connects and listens again, and reports a possible
        change."""
        self.close()


_CHANNEL_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def check_channel(channel: str) -> None:
    """Refuse a channel name that is not a lowercase identifier (it goes into ``LISTEN``).

    Raises:
        ValueError: It is not.
    """
    if not _CHANNEL_NAME.fullmatch(channel):
        raise ValueError(f"channel name {channel!r} is not a lowercase identifier")


def checked_channels(channels: str | Collection[str]) -> frozenset[str]:
    """``channels`` (one name or several) as a set, each checked by :func:`check_channel`.

    Raises:
        ValueError: A name is not a lowercase identifier.
    """
    names = frozenset([channels] if isinstance(channels, str) else channels)
    for channel in names:
        check_channel(channel)
    return names


def _listen_statement(channels: Collection[str]) -> str:
    """``LISTEN`` on each of ``channels`` (checked names), as one simple query."""
    return "; ".join(f"LISTEN {channel}" for channel in sorted(channels))


class ChangeBoard:
    """One process's change probe shared by its threads, each waiting for what it cares about.

    Whichever waiter finds nobody reading the probe reads it and posts every notice on the
    board; the others wait on the board. A waiter returns once a notice posted after its
    :meth:`mark` matches its interest (a notice that names no record matches every interest),
    so a follower of one proposal is not woken by writes to others, and no thread holds the
    connection while another's notice goes unseen. Take the mark *before* reading the feed:
    a change committed after the read is then posted after the mark.

    The probe listens on the channels its waiters need (:func:`channels_for`), added as they
    are first asked for. Notices sent to a channel before its ``LISTEN`` are not heard, so once
    one is added the board posts a notice that matches every interest: whoever waits re-reads.
    Once nobody has waited for ``idle_release_s`` seconds (:data:`IDLE_RELEASE_S` by default)
    the probe gives its connection up (:meth:`ChangeProbe.release`); the next wait takes one
    again, and re-reads.
    """

    def __init__(self, probe: ChangeProbe, idle_release_s: float | None = None) -> None:
        self.probe = probe
        if not probe.holds_server:  # nothing to give up: no timer
            idle_release_s = float("inf")
        self._idle_release_s = IDLE_RELEASE_S if idle_release_s is None else idle_release_s
        self._waiting = 0
        self._left_at = 0.0
        self._idle_timer: threading.Timer | None = None
        self._changed = threading.Condition()
        self._posted = 0
        self._board: deque[tuple[int, Notice]] = deque(maxlen=_BOARD_SIZE)
        self._reading = False
        self._wanted: frozenset[str] = frozenset()
        """Channels a waiter needs that the probe does not listen on yet."""

    def mark(self) -> int:
        """The board's position now; pass it to :meth:`wait`."""
        with self._changed:
            return self._posted

    def wait(
        self,
        since: int,
        timeout: float,
        interest: Interest | None = None,
        channels: frozenset[str] = ALL_CHANNELS,
    ) -> bool:
        """Wait until a notice posted after ``since`` matches ``interest`` (any notice when
        ``None``), or ``timeout`` seconds pass. ``channels``: where every notice ``interest``
        may match is sent (:func:`channels_for`).

        Returns:
            ``True`` if a matching notice came (re-read the feed), ``False`` on timeout.

        Raises:
            LedgerUnavailable: The probe's server cannot be reached.
        """
        return self.watch(since, timeout, interest, channels)[0]

    def watch(
        self,
        since: int,
        timeout: float,
        interest: Interest | None = None,
        channels: frozenset[str] = ALL_CHANNELS,
    ) -> tuple[bool, int]:
        """:meth:`wait`, also saying how far the board was checked: with ``False``, the
        position through which no notice after ``since`` matched ``interest``. A later wait
        with the same interest (or one that matches less) may start there instead of at
        ``since``, so the notices already checked are not checked again: a follower that
        keeps its mark for a second on a busy ledger checks each notice once, not once per
        wake-up.

        Raises:
            LedgerUnavailable: The probe's server cannot be reached.
        """
        with self._changed:
            self._waiting += 1
        try:
            return self._watch(since, timeout, interest, channels)
        finally:
            with self._changed:
                self._waiting -= 1
                if not self._waiting:
                    self._left_at = time.monotonic()
                    self._release_later(self._idle_release_s)

    def _release_later(self, delay: float) -> None:
        """Check for idleness in ``delay`` seconds (the caller holds the board's lock)."""
        if self._idle_timer is None and delay < float("inf"):
            self._idle_timer = threading.Timer(delay, self._release_if_idle)
            self._idle_timer.daemon = True
            self._idle_timer.start()

    def _release_if_idle(self) -> None:
        """Give the probe's connection up if nobody has waited since the idle time began."""
        with self._changed:
            self._idle_timer = None
            if self._waiting:
                return  # the last of them to leave checks again
            left_for = self._idle_release_s - (time.monotonic() - self._left_at)
            if left_for > 0:
                self._release_later(left_for)
                return
            try:
                self.probe.release()
            except Exception:  # on a timer thread: a failed close leaves nothing to give up
                pass

    def close(self) -> None:
        """Close the probe for good (the idle check is cancelled)."""
        with self._changed:
            timer, self._idle_timer = self._idle_timer, None
            self._idle_release_s = float("inf")
        if timer is not None:
            timer.cancel()
        self.probe.close()

    def _watch(
        self, since: int, timeout: float, interest: Interest | None, channels: frozenset[str]
    ) -> tuple[bool, int]:
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            with self._changed:
                if not self.probe.hears(channels) and not channels <= self._wanted:
                    self._wanted |= channels
                    if self._reading:
                        self.probe.wake()  # the reader comes back to add the channels
                matched, since = self._scan(since, interest)
                if matched:
                    return True, since
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False, since
                if self._reading:
                    self._changed.wait(remaining)
                    continue
                self._reading = True
                wanted, self._wanted = self._wanted, frozenset()
            notices: list[Notice] = []
            try:
                if wanted and not self.probe.hears(wanted):
                    self.probe.listen(wanted)
                    notices = [None]  # sent before the LISTEN, unheard: everyone re-reads now
                else:
                    notices = self.probe.notices(remaining)
            finally:
                with self._changed:
                    self._reading = False
                    for notice in notices:
                        self._posted += 1
                        self._board.append((self._posted, notice))
                    self._changed.notify_all()

    def _scan(self, since: int, interest: Interest | None) -> tuple[bool, int]:
        """Whether a notice after ``since`` matches ``interest``; if none does, the position
        checked through (the newest notice's)."""
        posted = self._posted
        if posted <= since:
            return False, since
        if interest is None or not self._board or self._board[0][0] > since + 1:
            return True, since  # some notices after ``since`` fell off the board: assume a match
        for number, notice in reversed(self._board):
            if number <= since:
                break
            if notice is None or interest(*notice):
                return True, since
        return False, posted
