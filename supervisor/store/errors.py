"""Translate driver errors into the ledger's typed errors.

A typed error carries the driver's first line only (e.g. ``permission denied for table
proposal``), never the statement or its parameters, which can hold audit payloads and
arguments; engines are also created with ``hide_parameters`` for the errors left untranslated.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc

from supervisor.ledger.errors import (
    LedgerBusy,
    LedgerCorrupt,
    LedgerPermissionDenied,
    LedgerUnavailable,
    LedgerValueRejected,
    NotALedger,
)

_BUSY_MARKERS = (
    "database is locked",
    "database table is locked",
    "busy",
    "lock timeout",
    "lock_timeout",
    "could not obtain lock",
    "deadlock detected",
    "could not serialize",
)


def classify(error: exc.DBAPIError) -> LedgerBusy | LedgerUnavailable:
    """Map a driver error to ``LedgerBusy`` (retry later) or ``LedgerUnavailable``."""
    return classify_driver_error(error.orig if error.orig is not None else error)


def classify_driver_error(error: BaseException) -> LedgerBusy | LedgerUnavailable:
    """:func:`classify` for an error raised by the driver itself (sqlite3, psycopg), as on the
    change feed's dedicated connection, which SQLAlchemy does not wrap."""
    text = str(error).lower()
    first_line = text.splitlines()[0] if text else type(error).__name__
    if any(marker in text for marker in _BUSY_MARKERS):
        return LedgerBusy(
            f"The ledger is busy: {first_line}.",
            hint="Other processes are writing; retry, or raise the busy timeout.",
        )
    if "disk" in text and ("full" in text or "i/o" in text):
        hint = "Free disk space where the ledger lives, then retry."
    elif "readonly" in text or "read-only" in text or "unable to open" in text:
        hint = (
            "Check the ledger file's and its folder's owner and permissions (on read-only "
            "storage a ledger can only be read: list, show, verify, export)."
        )
    else:
        hint = "Check SUPERVISOR_DB and that the database server is running and reachable."
    return LedgerUnavailable(f"The ledger cannot be used: {first_line}.", hint=hint)


#: SQLite's messages for a file that is not a database / a damaged one (SQLITE_NOTADB/CORRUPT).
_NOT_A_DATABASE = "file is not a database"
_MALFORMED = ("database disk image is malformed", "malformed database schema")


def damaged(error: exc.DBAPIError, where: str | None) -> LedgerUnavailable | None:
    """``NotALedger`` / ``LedgerCorrupt`` when SQLite says the file is not or no longer a
    database, else ``None``."""
    text = str(error.orig if error.orig is not None else error).lower()
    if _NOT_A_DATABASE in text:
        return NotALedger(where, reason="the file is not a SQLite database")
    if any(marker in text for marker in _MALFORMED):
        return LedgerCorrupt(where, reason="SQLite reports a malformed database (truncated?)")
    return None


def _sqlstate(error: exc.DBAPIError) -> str:
    """The PostgreSQL SQLSTATE of ``error`` ("" for SQLite and errors without one)."""
    state = getattr(error.orig, "sqlstate", None)
    return state if isinstance(state, str) else ""


def _read_only(error: exc.DBAPIError) -> bool:
    """A write refused by a read-only session (PostgreSQL SQLSTATE 25006)."""
    return _sqlstate(error) == "25006"


def _first_line(error: exc.DBAPIError) -> str:
    """The driver's message without SQLAlchemy's statement and parameters."""
    text = str(error.orig if error.orig is not None else type(error).__name__)
    return (text.strip().splitlines() or [type(error).__name__])[0][:200]


#: SQLSTATE of a privilege the session lacks (insufficient_privilege: a SELECT-only role).
_PERMISSION = "42501"
#: Class 22, data exception: a value too long for its column, a NUL in text, a number out of
#: range. The statement is fine; the value is not.
_DATA_EXCEPTION = "22"


def rejected(error: exc.DBAPIError) -> LedgerPermissionDenied | LedgerValueRejected | None:
    """The typed error for a statement the server refused for this session or value."""
    state = _sqlstate(error)
    if state == _PERMISSION:
        return LedgerPermissionDenied(_first_line(error))
    if state.startswith(_DATA_EXCEPTION):
        return LedgerValueRejected(_first_line(error), sqlstate=state)
    return None


@contextmanager
def translate_errors(where: str | None = None) -> Iterator[None]:
    """Re-raise operational driver errors as ``LedgerBusy`` / ``LedgerUnavailable``, a file
    that is not (or no longer) a SQLite database as ``NotALedger`` / ``LedgerCorrupt``, a
    privilege the session lacks as ``LedgerPermissionDenied`` and a value the server refuses
    (too long for its column) as ``LedgerValueRejected``.

    Args:
        where: The ledger as shown to a human (a path or a URL without its password).
    """
    try:
        yield
    except exc.DBAPIError as error:
        typed = damaged(error, where) or rejected(error)
        if typed is not None:
            raise typed from error  # engines hide parameters, so the cause shows none
        if isinstance(error, exc.OperationalError | exc.InterfaceError) or _read_only(error):
            raise classify(error) from error
        if error.connection_invalidated:
            raise classify(error) from error
        raise
