"""One listening connection per host for a PostgreSQL ledger: ``supervisor feed-relay``.

At each commit that notifies, PostgreSQL signals every connection of the database that
listens, whatever its channel (~24 us of server CPU each on this project's machine,
``bench/bench_listeners.py``), so a team whose every process listens pays that per process for
every audited write. A relay holds one listening connection for the processes of its host and
OS user: it listens on the channels they ask for and forwards each notification to those that
listen on its channel, over a Unix socket in a directory only that user can open.

A process finds the relay by its ledger's URL (:func:`relay_socket_path`); with none running,
or once it is gone, the process listens itself (:class:`RelayProbe` falls back, and tries the
relay again once its change board has given its connection up). A notice is only ever a hint:
it makes a follower re-read the ledger, so the worst a relay can do is delay one until the
feed's one-second re-read.

The protocol, one JSON value per line (UTF-8):

- client: ``{"hello": IDENTITY}`` (the ledger's user, host, port and database, and a server
  named in the URL's query or libpq's environment: :func:`relay_identity`; no password);
  the relay answers ``{"ok": true}``, or ``{"error": TEXT}`` and closes when it relays another
  ledger;
- client: ``{"listen": [CHANNEL, ...]}``; the relay answers ``{"listening": [...]}`` once its
  ``LISTEN`` is in effect;
- relay: ``[CHANNEL, PAYLOAD]`` for each notification on a channel the client listens on, and
  ``null`` when the relay's own connection was made again (anything may have been missed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import selectors
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL, Engine

from supervisor.errors import SupervisorError
from supervisor.ledger.errors import LedgerError
from supervisor.store.notify import (
    ALL_CHANNELS,
    CHANNEL,
    ChangeProbe,
    Notice,
    PostgresListenProbe,
    SqliteDataVersionProbe,
    TurnLock,
    Waker,
    checked_channels,
    parse_notice,
    woken,
)

RELAY_ENV = "SUPERVISOR_FEED_RELAY"
"""A socket path to use instead of the default one, or ``off``: never use a relay."""
_HANDSHAKE_S = 5.0
_SEND_S = 1.0
"""A client that does not read for this long is dropped (it falls back to listening itself)."""
_MAX_LINE = 1 << 20
_MAX_SOCKET_PATH = 107


class RelayUnsafe(SupervisorError, ValueError):
    """The relay's socket directory is not private to this OS user."""

    code = "feed_relay_unsafe"

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(
            f"Refusing the feed relay's directory {path}: {why}.",
            hint="Remove it (or set SUPERVISOR_FEED_RELAY to a socket path in a directory "
            "only you can open), then start the relay again.",
            path=str(path),
        )


class RelayNotPostgres(SupervisorError, ValueError):
    """A relay was asked for a ledger that is not PostgreSQL."""

    code = "feed_relay_not_postgres"

    def __init__(self) -> None:
        super().__init__(
            "The feed relay is for PostgreSQL ledgers: an SQLite ledger's followers poll a "
            "local file and cost no server anything.",
            hint="Pass --db postgresql+psycopg://... (or set SUPERVISOR_DB).",
        )


class RelayCannotListen(SupervisorError, OSError):
    """The relay's socket cannot be made where it was asked for."""

    code = "feed_relay_cannot_listen"

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(
            f"The feed relay cannot listen on {path}: {why}.",
            hint="Give a short path in a folder only you can open with --socket (and the "
            "same in SUPERVISOR_FEED_RELAY for the processes that should use it).",
            path=str(path),
        )


class RelayRunning(SupervisorError, RuntimeError):
    """Another relay already serves this socket."""

    code = "feed_relay_running"

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"A feed relay already serves {path}.",
            hint="One relay per host and ledger is enough; stop the other one first.",
            path=str(path),
        )


#: libpq settings a URL may give in its query instead of its authority (``?host=/run/pg``).
_SERVER_QUERY = ("host", "hostaddr", "port", "service", "dbname", "user")
#: What libpq reads from the environment when the URL names no server.
_SERVER_ENV = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGSERVICE")


def relay_identity(url: URL) -> str:
    """What names a ledger to its relay: user, host, port and database (no password).

    A server named in the URL's query (a Unix-socket folder: ``?host=/run/postgresql``) or,
    for a URL naming none, by libpq's environment is part of it, so two servers on one host
    never share a relay.
    """
    identity = f"{url.username or ''}@{url.host or ''}:{url.port or ''}/{url.database or ''}"
    named = {key: url.query[key] for key in _SERVER_QUERY if key in url.query}
    if not url.host and not named:
        named = {key: os.environ[key] for key in _SERVER_ENV if os.environ.get(key)}
    return identity + json.dumps(named, sort_keys=True) if named else identity


def relay_socket_path(url: URL) -> Path | None:
    """Where the relay for ``url``'s ledger listens (``None``: relays are turned off)."""
    override = os.environ.get(RELAY_ENV, "")
    if override == "off":
        return None
    if override:
        return Path(override)
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    digest = hashlib.sha256(relay_identity(url).encode()).hexdigest()[:16]
    return Path(base) / f"supervisor-{os.getuid()}" / f"feed-{digest}.sock"


def check_private(directory: Path, *, create: bool = False) -> None:
    """Make sure ``directory`` is a real directory of this OS user that nobody else can open.

    Raises:
        RelayUnsafe: It is a link, not a directory, another user's, or open to others.
    """
    if create and not os.path.lexists(directory):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode):
        raise RelayUnsafe(directory, "it is not a directory (or it is a link)")
    if info.st_uid != os.getuid():
        raise RelayUnsafe(directory, "another user owns it")
    if info.st_mode & 0o077:
        raise RelayUnsafe(directory, f"others can open it (mode {stat.S_IMODE(info.st_mode):o})")


def open_probe(engine: Engine, channels: str | Collection[str] = ALL_CHANNELS) -> ChangeProbe:
    """The probe that suits ``engine``'s dialect (``channels``: what a PostgreSQL probe hears,
    every audited write by default): on PostgreSQL through the host's feed relay when one runs
    for this ledger (one listening connection for the host instead of one per process), else
    a connection of its own."""
    if engine.dialect.name != "postgresql":
        return SqliteDataVersionProbe(engine)
    path = relay_socket_path(engine.url)
    if path is None or not path.exists():
        return PostgresListenProbe(engine, channels)
    return RelayProbe(engine, channels, path)


class _RelayGone(Exception):
    """The relay closed the connection, refused it, or sent something unreadable."""


def _line(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


class RelayProbe:
    """A change probe that hears the ledger through the host's relay (see the module).

    It falls back to its own :class:`PostgresListenProbe` when the relay cannot be reached,
    refuses it or goes away, and reports a possible change then (re-read). After
    :meth:`release` or :meth:`close` the next wait tries the relay again.
    """

    holds_server = True

    def __init__(self, engine: Engine, channels: str | Collection[str], path: Path) -> None:
        self._engine = engine
        self._channels = checked_channels(channels)
        self._path = path
        self._identity = relay_identity(engine.url)
        self._lock = TurnLock()
        self._waker = Waker()
        self._sock: socket.socket | None = None
        self._selector: selectors.BaseSelector | None = None
        self._buffer = b""
        self._backlog: list[Notice] = []
        self._direct: PostgresListenProbe | None = None
        self._open()

    @property
    def relayed(self) -> bool:
        """Whether notices come through the relay now (not a connection of this process)."""
        return self._sock is not None

    def _open(self) -> None:
        """Connect to the relay; failing that, listen directly.

        Raises:
            LedgerUnavailable: Neither the relay nor the server can be reached.
        """
        try:
            self._connect_relay()
        except (OSError, ValueError, _RelayGone):
            self._drop_relay()
            self._direct = PostgresListenProbe(self._engine, self._channels)

    def _connect_relay(self) -> None:
        check_private(self._path.parent)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock, self._buffer = sock, b""
        sock.settimeout(_HANDSHAKE_S)
        sock.connect(str(self._path))
        sock.sendall(_line({"hello": self._identity}))
        if self._reply(lambda value: isinstance(value, dict)) != {"ok": True}:
            raise _RelayGone("the relay serves another ledger")
        self._ask_to_listen(self._channels)
        sock.setblocking(False)
        selector = selectors.DefaultSelector()
        selector.register(sock, selectors.EVENT_READ, "socket")
        self._waker.open(selector)
        self._selector = selector

    def _ask_to_listen(self, channels: Collection[str]) -> None:
        """Ask the relay to listen on ``channels`` and wait until it does."""
        assert self._sock is not None
        previous = self._sock.gettimeout()
        self._sock.settimeout(_HANDSHAKE_S)
        try:
            self._sock.sendall(_line({"listen": sorted(channels)}))
            self._reply(lambda value: isinstance(value, dict) and "listening" in value)
        finally:
            self._sock.settimeout(previous)

    def _reply(self, is_reply: Callable[[Any], bool]) -> Any:
        """Read lines until one ``is_reply``; notifications read meanwhile are kept."""
        assert self._sock is not None
        while True:
            while b"\n" not in self._buffer:
                self._receive()
            raw, self._buffer = self._buffer.split(b"\n", 1)
            value = self._value(raw)
            if is_reply(value):
                return value
            self._backlog += self._notices([value])

    def _receive(self) -> None:
        assert self._sock is not None
        data = self._sock.recv(65536)
        if not data:
            raise _RelayGone("the relay closed the connection")
        self._buffer += data
        if len(self._buffer) > _MAX_LINE and b"\n" not in self._buffer:
            raise _RelayGone("the relay sent a line too long")

    @staticmethod
    def _value(raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except ValueError as error:
            raise _RelayGone("the relay sent something unreadable") from error

    def _notices(self, values: list[Any]) -> list[Notice]:
        """The notices among the relay's lines (replies are dropped)."""
        notices: list[Notice] = []
        for value in values:
            if value is None:
                notices.append(None)  # the relay's connection was made again: re-read
            elif isinstance(value, list) and len(value) == 2 and isinstance(value[1], str):
                if value[0] in self._channels:
                    notices.append(parse_notice(value[1]))
        return notices

    def _lines(self) -> list[Notice]:
        """The complete lines received so far, as notices."""
        *lines, self._buffer = self._buffer.split(b"\n")
        return self._notices([self._value(raw) for raw in lines])

    def _drop_relay(self) -> None:
        sock, self._sock = self._sock, None
        selector, self._selector = self._selector, None
        self._waker.close()
        if selector is not None:
            selector.close()
        if sock is not None:
            sock.close()
        self._buffer = b""

    def _fall_back(self) -> list[Notice]:
        """The relay is gone: listen directly, and say anything may have changed."""
        self._drop_relay()
        self._direct = PostgresListenProbe(self._engine, self._channels)
        return [None]

    def hears(self, channels: frozenset[str]) -> bool:
        """Whether every notice sent to ``channels`` reaches this probe."""
        return channels <= self._channels

    def listen(self, channels: Collection[str]) -> None:
        """Hear ``channels`` too: the relay listens on them before this returns (or, without
        a relay, this process does).

        Raises:
            ValueError: A channel's name is not a lowercase identifier.
            LedgerUnavailable: Neither the relay nor the server can be reached.
        """
        new = checked_channels(channels) - self._channels
        if not new:
            return
        with self._taken():
            self._channels |= new
            if self._direct is not None:
                self._direct.listen(new)
            elif self._sock is not None:
                try:
                    self._ask_to_listen(new)
                except (OSError, _RelayGone):
                    self._fall_back()

    def wake(self) -> None:
        """End a :meth:`notices` running in another thread now; it returns what it has."""
        self._waker.wake()
        direct = self._direct
        if direct is not None:
            direct.wake()

    def wait(self, timeout: float) -> bool:
        """Wait for one notice or ``timeout`` seconds."""
        return bool(self.notices(timeout))

    def notices(self, timeout: float) -> list[Notice]:
        """Wait for one notice or ``timeout`` seconds; return it and any others queued.

        Raises:
            LedgerUnavailable: Without a relay, the server cannot be reached.
        """
        with self._lock.reading():
            if self._direct is not None:
                return self._direct.notices(timeout)
            if self._sock is None:
                self._open()  # released or closed before: the relay again, if it is there
                return [None]
            try:
                return self._received(max(timeout, 0.0))
            except (OSError, _RelayGone):
                return self._fall_back()

    def _received(self, timeout: float) -> list[Notice]:
        selector = self._selector
        assert selector is not None
        received, self._backlog = self._backlog + self._lines(), []
        deadline = time.monotonic() + timeout
        while not received:
            remaining = deadline - time.monotonic()
            ready = selector.select(remaining) if remaining > 0 else []
            if not ready:
                return received
            if woken(ready):
                self._waker.drain()
                return received
            self._receive()
            received = self._lines()
        return received

    def _taken(self) -> contextlib.AbstractContextManager[None]:
        """The probe's lock, taken at once: a wait in another thread is woken to give it up."""
        return self._lock.taken(self.wake)

    def close(self) -> None:
        """Close the connection to the relay (or the probe's own); a later wait opens one
        again, through the relay if it is there."""
        with self._taken():
            self._drop_relay()
            direct, self._direct = self._direct, None
            if direct is not None:
                direct.close()

    def release(self) -> None:
        """:meth:`close`."""
        self.close()


class _Client:
    """One process connected to the relay."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.lock = threading.Lock()
        self.greeted = False
        self.channels: frozenset[str] = frozenset()
        self.buffer = b""
        self.alive = True

    def send(self, value: Any) -> None:
        """Send one line; a client that does not read within ``_SEND_S`` is dropped."""
        self.send_lines(_line(value))

    def send_lines(self, data: bytes) -> None:
        """Send complete lines in one write (one wake-up for the client, not one a line); a
        client that does not read within ``_SEND_S`` is dropped."""
        with self.lock:
            if not self.alive:
                return
            try:
                self.sock.sendall(data)
            except OSError:
                self.alive = False
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_RDWR)


class FeedRelay:
    """The relay: one listening connection, forwarded to the host's processes (the module)."""

    def __init__(self, engine: Engine, path: Path) -> None:
        if engine.dialect.name != "postgresql":
            raise RelayNotPostgres()
        self.path = path
        self._identity = relay_identity(engine.url)
        self._probe = PostgresListenProbe(engine, CHANNEL)
        self._clients: dict[int, _Client] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._waker = Waker()
        self.forwarded = 0
        """Notifications forwarded, counted once per client that was sent one."""

    def stop(self) -> None:
        """End :meth:`serve` (from another thread or a signal handler)."""
        self._stopping.set()
        self._waker.wake()

    def serve(self, on_ready: Callable[[], None] | None = None) -> None:
        """Accept clients and forward notifications until :meth:`stop`.

        Raises:
            RelayUnsafe: The socket's directory is not private to this OS user.
            RelayRunning: Another relay serves the socket.
        """
        server = self._bind()
        selector = selectors.DefaultSelector()
        pump = threading.Thread(target=self._pump, name="feed-relay-pump", daemon=True)
        try:
            selector.register(server, selectors.EVENT_READ, "server")
            self._waker.open(selector)
            pump.start()
            if on_ready is not None:
                on_ready()
            while not self._stopping.is_set():
                for key, _ in selector.select(1.0):
                    if key.data == "server":
                        self._accept(server, selector)
                    elif key.data == "wake":
                        self._waker.drain()
                    else:
                        self._read(key.data, selector)
        finally:
            self._stopping.set()
            self._probe.wake()
            pump.join(5)
            with self._lock:
                clients, self._clients = list(self._clients.values()), {}
            for client in clients:
                client.sock.close()
            selector.close()
            self._waker.close()
            server.close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            self._probe.close()

    def _bind(self) -> socket.socket:
        check_private(self.path.parent, create=True)
        if os.path.lexists(self.path):
            if not stat.S_ISSOCK(os.lstat(self.path).st_mode):
                raise RelayUnsafe(self.path, "something other than a socket is there")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(self.path))
            except OSError:
                self.path.unlink()  # left by a relay that was killed
            else:
                raise RelayRunning(self.path)
            finally:
                probe.close()
        if len(os.fsencode(self.path)) > _MAX_SOCKET_PATH:
            raise RelayCannotListen(self.path, "the path is too long for a Unix socket")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_mask = os.umask(0o177)
        try:
            server.bind(str(self.path))
        except OSError as error:
            server.close()
            raise RelayCannotListen(self.path, error.strerror or str(error)) from error
        finally:
            os.umask(old_mask)
        server.listen(128)
        return server

    def _accept(self, server: socket.socket, selector: selectors.BaseSelector) -> None:
        sock, _ = server.accept()
        sock.settimeout(_SEND_S)
        client = _Client(sock)
        with self._lock:
            self._clients[sock.fileno()] = client
        selector.register(sock, selectors.EVENT_READ, client)

    def _read(self, client: _Client, selector: selectors.BaseSelector) -> None:
        try:
            data = client.sock.recv(65536)
        except OSError:
            data = b""
        client.buffer += data
        lines = client.buffer.split(b"\n")
        client.buffer = lines.pop()
        try:
            if not data or len(client.buffer) > _MAX_LINE:
                raise ValueError("gone")
            for raw in lines:
                self._handle(client, json.loads(raw))
        except (ValueError, TypeError):
            client.alive = False
        if not client.alive:
            selector.unregister(client.sock)
            with self._lock:
                self._clients.pop(client.sock.fileno(), None)
            client.sock.close()

    def _handle(self, client: _Client, message: Any) -> None:
        """A client's line: its hello, or channels to listen on.

        Raises:
            ValueError: The line is not part of the protocol (the client is dropped).
        """
        if not isinstance(message, dict):
            raise ValueError("not a request")
        if not client.greeted:
            if message.get("hello") != self._identity:
                client.send({"error": f"this relay serves {self._identity}"})
                raise ValueError("another ledger")
            client.greeted = True
            client.send({"ok": True})
            return
        channels = message.get("listen")
        if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
            raise ValueError("not a listen request")
        names = checked_channels(channels)
        self._probe.listen(names)
        with self._lock:
            client.channels |= names
        client.send({"listening": sorted(names)})

    def _pump(self) -> None:
        """Forward what the listening connection hears, until the relay stops."""
        while not self._stopping.is_set():
            try:
                received = self._probe.notifications(1.0)
            except LedgerError:
                time.sleep(0.25)  # the server is away: the next call reconnects
                continue
            with self._lock:
                clients = [c for c in self._clients.values() if c.greeted and c.alive]
            if received is None:  # reconnected: anything sent meanwhile was lost
                for client in clients:
                    client.send(None)
                continue
            lines = [(channel, _line([channel, payload])) for channel, payload in received]
            for client in clients:  # what each client listens for, in one write
                wanted = [line for channel, line in lines if channel in client.channels]
                if wanted:
                    client.send_lines(b"".join(wanted))
                    self.forwarded += len(wanted)
