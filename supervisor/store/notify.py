"""Change probes: cheap ways to learn that another connection committed.

SQLite: ``PRAGMA data_version`` on a dedicated connection changes whenever any other connection
(in any process) commits; it is polled every 20 ms. PostgreSQL: ``LISTEN`` on a dedicated
autocommit psycopg connection; writers ``NOTIFY`` in the same transaction as the change. Callers
re-read by cursor after every wake-up and also on a timer, so a lost notification only delays.

Driver errors on the probe's own connection (SQLAlchemy does not see it) are translated like
every other ledger call, into ``LedgerUnavailable`` / ``LedgerBusy``. A PostgreSQL probe whose
connection was lost (a server restart) reconnects on its next ``wait`` and reports a possible
change, since notifications sent meanwhile are gone.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from sqlalchemy.engine import Engine

from supervisor.store.errors import classify_driver_error

CHANNEL = "supervisor_ledger"
"""Audited writes notify this channel (the payload is the newest audit seq)."""
TRACE_CHANNEL = "supervisor_trace"
"""Transactions that append trace events notify this channel (live tails wake on it)."""
SQLITE_POLL_S = 0.02


class ChangeProbe(Protocol):
    """Blocks until another connection may have committed, or a timeout passes."""

    def wait(self, timeout: float) -> bool:
        """Return ``True`` if something may have changed since the previous call."""
        ...

    def close(self) -> None:
        """Release the dedicated connection."""
        ...


class SqliteDataVersionProbe:
    """Polls ``PRAGMA data_version`` on one connection held for the probe's lifetime."""

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

    def close(self) -> None:
        """Return the connection to the pool."""
        self._connection.close()


class PostgresListenProbe:
    """``LISTEN`` on a dedicated autocommit connection, re-established after a lost one."""

    def __init__(self, engine: Engine, channel: str = CHANNEL) -> None:
        self._dsn = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._channel = channel
        self._lock = threading.Lock()
        self._connection: Any = None
        self._connect()

    def _connect(self) -> None:
        import psycopg  # only PostgreSQL ledgers pay for the import

        connection = None
        try:
            connection = psycopg.connect(self._dsn, autocommit=True, connect_timeout=10)
            connection.execute(f"LISTEN {self._channel}")
        except psycopg.Error as error:
            if connection is not None:
                connection.close()
            raise classify_driver_error(error) from error
        self._connection = connection

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def wait(self, timeout: float) -> bool:
        """Wait for one notification or ``timeout`` seconds; drain any others queued.

        Raises:
            LedgerUnavailable: The server cannot be reached (the next call reconnects).
        """
        import psycopg

        with self._lock:
            if self._connection is None or self._connection.closed:
                self._drop()
                self._connect()
                return True  # anything sent while disconnected was lost: re-read
            woke = False
            try:
                for _ in self._connection.notifies(timeout=max(timeout, 0.0), stop_after=1):
                    woke = True
                if woke:
                    for _ in self._connection.notifies(timeout=0.0):
                        pass
            except psycopg.Error as error:
                self._drop()
                raise classify_driver_error(error) from error
            return woke

    def close(self) -> None:
        """Close the listening connection (a ``wait`` in another thread then fails and ends)."""
        self._drop()


def open_probe(engine: Engine, channel: str = CHANNEL) -> ChangeProbe:
    """The probe that suits ``engine``'s dialect (``channel``: what a PostgreSQL probe hears)."""
    if engine.dialect.name == "postgresql":
        return PostgresListenProbe(engine, channel)
    return SqliteDataVersionProbe(engine)
