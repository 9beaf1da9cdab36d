"""Engine factory: where the ledger lives and how connections to it are configured.

Resolution order for the ledger URL: an explicit ``url`` argument, then ``SUPERVISOR_DB`` (a
SQLAlchemy URL), then ``SUPERVISOR_HOME`` (a folder holding ``ledger.db``), then ``ledger.db``
in ``platformdirs.user_data_dir("agent-supervisor")``. Nothing here runs at import time.

Only SQLite (``sqlite:///PATH``) and PostgreSQL over psycopg 3 are ledger engines; any other URL
is refused with ``UnsupportedLedgerUrl`` before a driver is loaded. A read-only engine never
creates, migrates or writes anything. SQLite connections run with ``PRAGMA query_only``; where
the file or its folder is not writable (a read-only mount, permissions) the file is opened with
``mode=ro`` as well, and with ``immutable=1`` when no write-ahead log exists or can be created
there (so nothing can be writing). Where both are writable a plain connection is kept, so that
SQLite removes the WAL sidecars it opened when the last connection closes. PostgreSQL sessions
default to read-only transactions.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any, Literal

import platformdirs
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine

from supervisor.ledger.errors import (
    LedgerCorrupt,
    LedgerNotFound,
    LedgerUnavailable,
    NotALedger,
    UnsupportedLedgerUrl,
)

Synchronous = Literal["NORMAL", "FULL"]

APP_NAME = "agent-supervisor"
LEDGER_FILE = "ledger.db"
DEFAULT_BUSY_TIMEOUT_S = 30.0
WRITE_OPTION = "ledger_write"
"""Execution option that makes a SQLite transaction start with ``BEGIN IMMEDIATE``."""


def default_ledger_path() -> Path:
    """The embedded ledger file used when nothing else is configured."""
    home = os.environ.get("SUPERVISOR_HOME")
    folder = Path(home).expanduser() if home else Path(platformdirs.user_data_dir(APP_NAME))
    return folder / LEDGER_FILE


def resolve_url(url: str | None = None) -> str:
    """Return the ledger URL to use (see the module docstring for the order).

    Args:
        url: An explicit SQLAlchemy URL; wins over the environment.

    Returns:
        A SQLAlchemy URL string.
    """
    if url:
        return url
    from_env = os.environ.get("SUPERVISOR_DB")
    if from_env:
        return from_env
    return f"sqlite:///{default_ledger_path()}"


#: Engines the ledger runs on, and the drivers accepted for each ("" is the default driver).
SUPPORTED_DRIVERS: dict[str, frozenset[str]] = {
    "sqlite": frozenset({"", "pysqlite"}),
    "postgresql": frozenset({"", "psycopg", "psycopg2"}),
}


def shown_url(url: str | URL) -> str:
    """``url`` as it may be shown to a human: a SQLite file as its path, passwords hidden."""
    try:
        parsed = sa.make_url(url) if isinstance(url, str) else url
    except sa.exc.ArgumentError:
        return repr(str(url))
    database = parsed.database or ""
    if parsed.drivername.startswith("sqlite") and database not in ("", ":memory:"):
        if parsed.query.get("uri") == "true":
            return urllib.parse.unquote(database.removeprefix("file:").partition("?")[0])
        return database
    return parsed.render_as_string(hide_password=True)


def supported_url(url: str) -> URL:
    """Parse ``url`` and check that it names a ledger engine (see ``SUPPORTED_DRIVERS``).

    Raises:
        UnsupportedLedgerUrl: ``url`` is not a URL, or names another engine or driver.
    """
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        raise UnsupportedLedgerUrl(repr(url), reason="it is not a URL") from None
    backend, _, driver = parsed.drivername.partition("+")
    drivers = SUPPORTED_DRIVERS.get(backend)
    if drivers is None:
        raise UnsupportedLedgerUrl(
            shown_url(parsed), reason=f"{backend!r} is not a ledger engine (sqlite, postgresql)"
        )
    if driver not in drivers:
        raise UnsupportedLedgerUrl(
            shown_url(parsed),
            reason=f"driver {driver!r} is not supported for {backend} "
            f"({', '.join(sorted(name for name in drivers if name))})",
        )
    return parsed


def sqlite_path(url: str | URL) -> Path | None:
    """The database file of a SQLite URL, or ``None`` for other engines and in-memory URLs."""
    parsed = sa.make_url(url) if isinstance(url, str) else url
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser()


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
    database = url.database or ""
    if path is None and database.startswith("file:"):
        return None  # a SQLite URI chosen by the caller: SQLite itself checks it (mode=ro)
    if path is None:
        raise LedgerNotFound(shown_url(url), reason="is an in-memory database, which is empty")
    if not path.exists():
        raise LedgerNotFound(str(path))
    if not path.is_file():
        raise LedgerNotFound(str(path), reason="is not a file")
    return path


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


#: The oldest SQLite whose UPDATE ... RETURNING the repository relies on.
MIN_SQLITE = (3, 35)


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
        connect_args: dict[str, Any] = {}
        if read_only:  # every transaction of the session is READ ONLY unless it asks otherwise
            given = resolved.query.get("options", "")
            given = given if isinstance(given, str) else " ".join(given)
            connect_args["options"] = f"{given} -c default_transaction_read_only=on".strip()
        return sa.create_engine(resolved, echo=echo, pool_pre_ping=True, connect_args=connect_args)

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
    if read_only or must_exist:
        path = _existing_sqlite_file(resolved, path)
    if path is not None and path.is_file():
        check_sqlite_header(path)
    if read_only:
        resolved = _read_only_url(resolved, path)
    elif path is not None:
        _prepare_sqlite_file(path)
    engine = sa.create_engine(
        resolved,
        echo=echo,
        connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
    )
    busy_ms = int(busy_timeout_s * 1000)

    @sa.event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # transactions are begun explicitly below
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if read_only:
                cursor.execute("PRAGMA query_only = ON")
                return
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute(f"PRAGMA synchronous = {level}")
        finally:
            cursor.close()
        if path is not None:
            _private_sidecars(path)

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        if connection.get_execution_options().get(WRITE_OPTION):
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            connection.exec_driver_sql("BEGIN")

    return engine
