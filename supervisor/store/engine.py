"""Engine factory: how connections to the ledger are configured.

Where the ledger is (``SUPERVISOR_DB``, paths and URLs) is decided in
:mod:`supervisor.store.urls`, re-exported here. A read-only engine never creates, migrates or
writes anything. SQLite connections run with ``PRAGMA query_only``; where the file or its folder
is not writable (a read-only mount, permissions) the file is opened with ``mode=ro`` as well,
and with ``immutable=1`` when no write-ahead log exists or can be created there (so nothing can
be writing). Where both are writable a plain connection is kept, so that SQLite removes the WAL
sidecars it opened when the last connection closes. PostgreSQL sessions default to read-only
transactions. A database that holds other tables but no ``ledger_meta`` is left as it is (not
even its journal mode is set), for :mod:`supervisor.store.migrate` to refuse.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine

from supervisor.ledger.errors import LedgerCorrupt, LedgerNotFound, LedgerUnavailable, NotALedger
from supervisor.store.direct import JOINED_OPTION
from supervisor.store.urls import (
    APP_NAME,
    LEDGER_FILE,
    SUPPORTED_DRIVERS,
    checked_sqlite_path,
    default_ledger_path,
    filesystem_errors,
    in_memory,
    resolve_url,
    shown_url,
    sqlite_path,
    supported_url,
    to_ledger_url,
)

__all__ = [
    "APP_NAME",
    "DEFAULT_BUSY_TIMEOUT_S",
    "LEDGER_FILE",
    "SUPPORTED_DRIVERS",
    "WRITE_OPTION",
    "Synchronous",
    "check_sqlite_header",
    "checked_sqlite_path",
    "create_ledger_engine",
    "default_ledger_path",
    "resolve_url",
    "shown_url",
    "sqlite_path",
    "supported_url",
    "to_ledger_url",
]

Synchronous = Literal["NORMAL", "FULL"]

DEFAULT_BUSY_TIMEOUT_S = 30.0
WRITE_OPTION = "ledger_write"
"""Execution option that makes a SQLite transaction start with ``BEGIN IMMEDIATE``."""


def _prepare_sqlite_file(path: Path) -> None:
    """Create the folder (0700) and the database file (0600) before SQLite touches them."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        os.close(fd)
        os.chmod(path, 0o600)


def _private_sidecars(path: Path) -> None:
    """Make the WAL and shared-memory files as private as the database whatever the umask."""
    if path.stat().st_mode & 0o077:
        return
    for suffix in ("-wal", "-shm"):
        sidecar = path.with_name(path.name + suffix)
        if sidecar.exists() and sidecar.stat().st_mode & 0o077:
            os.chmod(sidecar, 0o600)


def _existing_sqlite_file(url: URL, path: Path | None) -> Path | None:
    """The ledger file of ``url``, which must exist (``LedgerNotFound`` otherwise)."""
    if in_memory(url):
        query = "&".join(f"{key}={value}" for key, value in sorted(url.query.items()))
        raise LedgerNotFound(
            repr(
                f"sqlite://{'/' + url.database if url.database else ''}"
                f"{'?' + query if query else ''}"
            ),
            reason="is an in-memory database, which starts empty and vanishes (in-memory URLs "
            "are refused where a ledger must already exist)",
        )
    if path is None:
        return None  # a SQLite URI chosen by the caller: SQLite itself checks it (mode=ro)
    if not path.exists():
        raise LedgerNotFound(str(path))
    if not path.is_file():
        raise LedgerNotFound(str(path), reason="is not a file")
    return path


#: (device, inode) of every SQLite file an engine of this process has connected to. Python must
#: never open and close such a file again: POSIX drops *all* of a process's fcntl locks on a file
#: when any descriptor of it is closed, so the SQLite connections this process holds would lose
#: their shared lock, and another process closing its last connection would checkpoint and delete
#: the WAL under them (they would then read an empty or stale database and write into a deleted
#: WAL). Such files were checked when first opened here; the header check skips them.
_CONNECTED: set[tuple[int, int]] = set()


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_HEADER_BYTES = 100


def _read_header(path: Path) -> tuple[bytes, int] | None:
    try:
        with path.open("rb") as handle:
            return handle.read(SQLITE_HEADER_BYTES), os.fstat(handle.fileno()).st_size
    except OSError:
        return None  # unreadable: SQLite reports it with its own error


def _short_by_header(header: bytes, size: int) -> int | None:
    """The size the header's page count implies, when the file is shorter than that."""
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    valid = header[92:96] == header[24:28]  # SQLite marks the page count as current
    return pages * page_size if valid and size < pages * page_size else None


def _being_written(path: Path) -> bool:
    """A WAL with frames or a rollback journal exists: a writer may be mid-checkpoint, having
    written page 1 (with the new page count) before the pages that extend the file."""
    wal = path.with_name(path.name + "-wal")
    journal = path.with_name(path.name + "-journal")
    try:
        return (wal.exists() and wal.stat().st_size > 0) or journal.exists()
    except OSError:
        return True


def check_sqlite_header(path: Path) -> None:
    """Refuse a file that is not a SQLite database, or is shorter than its header says.

    Runs before SQLite opens the file, so such a file never gets WAL sidecars next to it. The
    header's page count is trusted only when SQLite marks it valid (offset 92 equals the change
    counter at offset 24, as every SQLite since 3.7.0 writes it) and no WAL or journal exists
    that a writer could be copying into the file at this moment (SQLite then judges the file).

    Raises:
        NotALedger: The file does not start with the SQLite header.
        LedgerCorrupt: The header is cut short or claims more pages than the file holds.
    """
    read = _read_header(path)
    if read is None:
        return
    header, size = read
    if not header:
        return  # an empty file is an empty database
    if not header.startswith(SQLITE_MAGIC):
        if SQLITE_MAGIC.startswith(header):
            raise LedgerCorrupt(str(path), reason=f"the file ends after {size} bytes")
        raise NotALedger(str(path), reason="the file is not a SQLite database")
    if len(header) < SQLITE_HEADER_BYTES:
        raise LedgerCorrupt(str(path), reason=f"the file ends after {size} bytes")
    page_size = int.from_bytes(header[16:18], "big")
    if page_size != 1 and (page_size < 512 or page_size & (page_size - 1)):
        raise LedgerCorrupt(str(path), reason=f"its header names a page size of {page_size}")
    if _short_by_header(header, size) is None or _being_written(path):
        return
    reread = _read_header(path)  # a checkpoint may have finished meanwhile
    expected = _short_by_header(*reread) if reread is not None else None
    if expected is not None:
        raise LedgerCorrupt(
            str(path),
            reason=f"the file holds {reread[1] if reread else size} bytes but its header says "
            f"{expected} (truncated)",
        )


def _read_only_url(url: URL, path: Path | None) -> URL:
    """``url`` as a ``mode=ro`` SQLite URI where the storage is not writable, else unchanged.

    ``immutable=1`` is added where no WAL exists and none can be created beside the file.
    """
    if path is None:
        return url.update_query_dict({"mode": "ro", "uri": "true"})
    if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK):
        return url  # PRAGMA query_only refuses writes; SQLite cleans up its sidecars itself
    query = {"mode": "ro"}
    wal = path.with_name(path.name + "-wal")
    if not os.access(path.parent, os.W_OK) and not wal.exists():
        # No WAL can exist or be created, so nothing can be writing: the file is all there is.
        query["immutable"] = "1"
    return sa.engine.URL.create(
        "sqlite", database=f"file:{urllib.parse.quote(str(path))}", query={**query, "uri": "true"}
    )


_SCHEMA_NAMES = (
    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
    "AND name NOT LIKE 'sqlite~_%' ESCAPE '~'"
)


def _left_as_it_is(cursor: Any, *, may_create: bool) -> bool:
    """The SQLite database is not a ledger and must not become one, so not even its journal
    mode may change (``PRAGMA journal_mode = WAL`` rewrites the file's header): it holds tables
    but no ``ledger_meta`` (someone else's, the rule :func:`supervisor.store.migrate.
    stored_schema_version` refuses by), or it is empty and this engine may not create one."""
    names = {row[0] for row in cursor.execute(_SCHEMA_NAMES)}
    if "ledger_meta" in names:
        return False
    return bool(names) or not may_create


#: The oldest SQLite whose UPDATE ... RETURNING the repository relies on.
def _ping_if_stirred(dialect: sa.Dialect) -> Any:
    """A pool ``checkout`` listener for PostgreSQL: what ``pool_pre_ping`` does, without its
    round trip while the connection is quiet.

    A pooled connection that the server ended (a restart, ``pg_terminate_backend``, an idle
    timeout) has the server's goodbye or the socket's end waiting to be read; a healthy idle
    one has nothing. So the socket is polled without waiting, and only when something is there
    (or the connection is already known closed) is the server pinged as ``pool_pre_ping``
    would: a failed ping recycles this connection and every older one in the pool, and the
    checkout goes on with a new one. What neither detects is the same: a server that vanished
    without closing its end (a network cut) shows when the first statement times out.

    ``pool_pre_ping`` cost each ledger call a round trip (4 of the 16 an approval cycle makes),
    and on a team's ledger a step's checkout precedes its share of the chain lock.
    """
    import select

    readable = select.POLLIN | select.POLLPRI

    def checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if not dbapi_connection.closed:
            poller = select.poll()
            poller.register(dbapi_connection.fileno(), readable)
            if not poller.poll(0):
                return
        if not dialect._do_ping_w_event(dbapi_connection):
            raise sa.exc.InvalidatePoolError("the server ended this pooled connection")

    return checkout


MIN_SQLITE = (3, 35)


def _generic_plans(dbapi_connection: Any, _record: Any) -> None:
    """A new PostgreSQL connection plans each prepared statement once (a generic plan).

    The ledger's hot statements are prepared once per connection (``direct_pg``); left to
    choose, the server re-planned some at most of their runs, each plan costing more than the
    statement (a batch read by ids: 59% of its runs, ~0.8 ms a plan; ``bench_team.py
    --statements``). Each is a key or index seek whatever its values. Statements through Core
    are not prepared: they are still planned with their values. Sent as a plain ``SET``, not
    a startup option, so a pooler that refuses unknown startup options still connects; one
    that drops the setting (PostgreSQL before 12 has none) leaves the server's default.
    """
    pgconn = getattr(dbapi_connection, "pgconn", None)
    if pgconn is not None:
        pgconn.exec_(b"SET plan_cache_mode = force_generic_plan")  # a failure is dropped


def create_ledger_engine(
    url: str | None = None,
    *,
    synchronous: Synchronous | None = None,
    busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
    echo: bool = False,
    read_only: bool = False,
    must_exist: bool = False,
) -> Engine:
    """Create an engine for the ledger (no schema work; see ``supervisor.store.migrate``).

    SQLite gets WAL, a busy timeout, foreign keys and the chosen ``synchronous`` level on every
    connection, and transactions that the repository marks as writes begin with
    ``BEGIN IMMEDIATE`` so writers queue instead of failing. PostgreSQL uses psycopg 3.

    Args:
        url: SQLAlchemy URL; ``None`` resolves it with :func:`resolve_url`.
        synchronous: SQLite durability level; defaults to ``SUPERVISOR_SQLITE_SYNCHRONOUS`` or
            ``NORMAL`` (``FULL`` also fsyncs the WAL on every commit).
        busy_timeout_s: How long a SQLite writer waits for the lock before ``LedgerBusy``.
        echo: Log SQL (debugging).
        read_only: Never write: SQLite ``query_only`` (and ``mode=ro`` on read-only storage;
            no file, folder or WAL setting is created), PostgreSQL read-only transactions.
            Implies ``must_exist``.
        must_exist: Refuse a SQLite file that does not exist instead of creating it.

    Returns:
        A configured SQLAlchemy engine.

    Raises:
        ValueError: ``synchronous`` is not NORMAL or FULL.
        UnsupportedLedgerUrl: The URL names another engine or driver.
        LedgerNotFound: ``must_exist``/``read_only`` and there is no such SQLite file.
    """
    resolved = supported_url(resolve_url(url))
    backend = resolved.get_backend_name()
    if backend == "postgresql":
        resolved = resolved.set(drivername="postgresql+psycopg")
        # psycopg prepares nothing itself: the ledger's hot statements run on libpq and are
        # prepared once per connection by supervisor.store.direct_pg, and psycopg's cache would
        # DEALLOCATE ALL (those too) at a rollback after an error. Statements through Core are
        # parsed and planned at each run: none is on a step's path.
        connect_args: dict[str, Any] = {"prepare_threshold": None}
        if read_only:  # every transaction of the session is READ ONLY unless it asks otherwise
            given = resolved.query.get("options", "")
            given = given if isinstance(given, str) else " ".join(given)
            connect_args["options"] = f"{given} -c default_transaction_read_only=on".strip()
        engine = sa.create_engine(
            resolved, echo=echo, hide_parameters=True, connect_args=connect_args
        )  # fmt: skip
        sa.event.listen(engine, "checkout", _ping_if_stirred(engine.dialect))
        sa.event.listen(engine, "connect", _generic_plans)
        from supervisor.store.direct_pg import rollback_keeping_statements

        # A lost race's rollback must not cost the process its prepared statements.
        dialect: Any = engine.dialect
        dialect.do_rollback = rollback_keeping_statements
        return engine

    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise LedgerUnavailable(
            f"This Python uses SQLite {sqlite3.sqlite_version}; the ledger needs "
            f"{'.'.join(map(str, MIN_SQLITE))} or newer (UPDATE ... RETURNING).",
            hint="Use a Python built against a newer libsqlite3, or a PostgreSQL ledger "
            "(SUPERVISOR_DB=postgresql+psycopg://...).",
        )
    level = (synchronous or os.environ.get("SUPERVISOR_SQLITE_SYNCHRONOUS") or "NORMAL").upper()
    if level not in ("NORMAL", "FULL"):
        raise ValueError(f"synchronous must be NORMAL or FULL, not {level!r}.")
    path = sqlite_path(resolved)
    if path is not None:
        resolved = resolved.set(database=str(path))  # SQLite itself would not expand "~"
    with filesystem_errors(shown_url(resolved)):
        if read_only or must_exist:
            path = _existing_sqlite_file(resolved, path)
        if path is not None and path.is_file() and _inode(path) not in _CONNECTED:
            check_sqlite_header(path)
        if read_only:
            resolved = _read_only_url(resolved, path)
        elif path is not None:
            _prepare_sqlite_file(path)
    engine = sa.create_engine(
        resolved,
        echo=echo,
        hide_parameters=True,
        connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
    )
    busy_ms = int(busy_timeout_s * 1000)

    @sa.event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        connected = _inode(path) if path is not None else None
        if connected is not None:  # SQLite holds the file open (and locked) from now on
            _CONNECTED.add(connected)
        dbapi_connection.isolation_level = None  # transactions are begun explicitly below
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if read_only:
                cursor.execute("PRAGMA query_only = ON")
                return
            if _left_as_it_is(cursor, may_create=not must_exist):
                return  # not a ledger (yet) and not to become one: ensure_schema refuses it
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute(f"PRAGMA synchronous = {level}")
        finally:
            cursor.close()
        if path is not None:
            _private_sidecars(path)

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        options = connection.get_execution_options()
        if options.get(JOINED_OPTION):
            return  # opened inside a transaction begun on the driver (DriverTransaction)
        write = options.get(WRITE_OPTION)
        statement = "BEGIN IMMEDIATE" if write else "BEGIN"
        driver: Any = connection.connection.driver_connection
        try:  # on the driver's connection: a third of a small write's cost through the engine
            driver.execute(statement)
        except sqlite3.Error as error:
            raise sa.exc.DBAPIError.instance(statement, None, error, sqlite3.Error) from error

    return engine
