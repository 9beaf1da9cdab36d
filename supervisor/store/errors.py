"""Translate driver errors into the ledger's typed errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc

from supervisor.ledger.errors import LedgerBusy, LedgerUnavailable

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
    elif "readonly" in text or "read-only" in text:
        hint = "Check the ledger file's owner and permissions."
    else:
        hint = "Check SUPERVISOR_DB and that the database server is running and reachable."
    return LedgerUnavailable(f"The ledger cannot be used: {first_line}.", hint=hint)


@contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise operational driver errors as ``LedgerBusy`` / ``LedgerUnavailable``."""
    try:
        yield
    except (exc.OperationalError, exc.InterfaceError) as error:
        raise classify(error) from error
    except exc.DBAPIError as error:
        if error.connection_invalidated:
            raise classify(error) from error
        raise
