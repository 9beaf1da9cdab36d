"""Engine factory: where the ledger lives and how connections to it are configured.

Resolution order for the ledger URL: an explicit ``url`` argument, then ``SUPERVISOR_DB`` (a
SQLAlchemy URL), then ``SUPERVISOR_HOME`` (a folder holding ``ledger.db``), then ``ledger.db``
in ``platformdirs.user_data_dir("agent-supervisor")``. Nothing here runs at import time.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any, Literal

import platformdirs
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine

from supervisor.ledger.errors import LedgerUnavailable

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


#: The oldest SQLite whose UPDATE ... RETURNING the repository relies on.
MIN_SQLITE = (3, 35)


def create_ledger_engine(
    url: str | None = None,
    *,
    synchronous: Synchronous | None = None,
    busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
    echo: bool = False,
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

    Returns:
        A configured SQLAlchemy engine.

    Raises:
        ValueError: ``synchronous`` is not NORMAL or FULL.
    """
    resolved = sa.make_url(resolve_url(url))
    backend = resolved.get_backend_name()
    if backend == "postgresql" and resolved.get_driver_name() in ("", "psycopg2"):
        resolved = resolved.set(drivername="postgresql+psycopg")
    if backend != "sqlite":
        return sa.create_engine(resolved, echo=echo, pool_pre_ping=True)

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
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA foreign_keys = ON")
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
