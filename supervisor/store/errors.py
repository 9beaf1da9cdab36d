"""Translate driver errors into the ledger's typed errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc

from supervisor.ledger.errors import LedgerBusy, LedgerCorrupt, LedgerUnavailable, NotALedger

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


def _read_only(error: exc.DBAPIError) -> bool:
    """A write refused by a read-only session (PostgreSQL SQLSTATE 25006)."""
    return getattr(error.orig, "sqlstate", None) == "25006"


@contextmanager
def translate_errors(where: str | None = None) -> Iterator[None]:
    """Re-raise operational driver errors as ``LedgerBusy`` / ``LedgerUnavailable``, and a file
    that is not (or no longer) a SQLite database as ``NotALedger`` / ``LedgerCorrupt``.

    Args:
        where: The ledger as shown to a human (a path or a URL without its password).
    """
    try:
        yield
    except exc.DBAPIError as error:
        typed = damaged(error, where)
        if typed is not None:
            raise typed from error
        if isinstance(error, exc.OperationalError | exc.InterfaceError) or _read_only(error):
            raise classify(error) from error
        if error.connection_invalidated:
            raise classify(error) from error
        raise
