"""Where the ledger is: the URL rule shared by the SDK, ``SUPERVISOR_DB`` and every ``--db``.

Resolution order: an explicit ``url`` argument, then ``SUPERVISOR_DB``, then
``SUPERVISOR_HOME`` (a folder holding ``ledger.db``), then ``ledger.db`` in
``platformdirs.user_data_dir("agent-supervisor")``. The argument and ``SUPERVISOR_DB`` are each
a SQLAlchemy URL (anything containing ``://``) or a SQLite file path, made absolute here
(:func:`to_ledger_url`): one rule for ``--db``, the environment, the TUI and the SDK.

Only SQLite (``sqlite:///PATH``) and PostgreSQL over psycopg 3 are ledger engines; any other URL
is refused with ``UnsupportedLedgerUrl`` before a driver is loaded (:func:`supported_url`). A
path the filesystem refuses is ``LedgerPathInvalid`` (:func:`filesystem_errors`), never a raw
``OSError``. Nothing here runs at import time.
"""

from __future__ import annotations

import errno
import os
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs
import sqlalchemy as sa
from sqlalchemy.engine import URL

from supervisor.errors import SupervisorError
from supervisor.ledger.errors import LedgerPathInvalid, LedgerUnavailable, UnsupportedLedgerUrl

APP_NAME = "agent-supervisor"
LEDGER_FILE = "ledger.db"


def default_ledger_path() -> Path:
    """The embedded ledger file used when nothing else is configured.

    Raises:
        LedgerPathInvalid: ``SUPERVISOR_HOME`` names the home folder of an unknown user.
    """
    home = os.environ.get("SUPERVISOR_HOME")
    folder = _expanded(home) if home else Path(platformdirs.user_data_dir(APP_NAME))
    return folder / LEDGER_FILE


def _expanded(path_text: str) -> Path:
    """``path_text`` with ``~`` / ``~user`` expanded.

    Raises:
        LedgerPathInvalid: It names the home folder of a user this system does not know.
    """
    try:
        return Path(path_text).expanduser()
    except RuntimeError:  # "Could not determine home directory"
        user = path_text.partition("/")[0]
        raise LedgerPathInvalid(
            path_text, reason=f"{user} names the home folder of a user this system does not have"
        ) from None


def to_ledger_url(value: str) -> str:
    """``--db`` / ``SUPERVISOR_DB`` as a URL: a SQLAlchemy URL (it contains ``://``) is kept
    as it is, anything else is a SQLite file path, made absolute (``~`` expanded).

    Raises:
        UnsupportedLedgerUrl: ``value`` is empty.
        LedgerPathInvalid: A path that names the home folder of an unknown user.
    """
    if "://" in value:
        return value
    if not value:
        raise UnsupportedLedgerUrl("''", reason="it is empty (give a SQLite path or a URL)")
    path = _expanded(value)
    try:
        path = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop or an unreadable folder on the way
        path = Path(os.path.abspath(path))
    return f"sqlite:///{path}"


def resolve_url(url: str | None = None) -> str:
    """Return the ledger URL to use (see the module docstring for the order).

    Args:
        url: An explicit SQLAlchemy URL or SQLite path; wins over the environment.

    Returns:
        A SQLAlchemy URL string.

    Raises:
        LedgerPathInvalid: The path names the home folder of an unknown user.
    """
    if url:
        return to_ledger_url(url)
    from_env = os.environ.get("SUPERVISOR_DB")
    if from_env:
        return to_ledger_url(from_env)
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
    except (sa.exc.ArgumentError, ValueError):
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
    except ValueError as error:  # e.g. a port that is not a number, an unclosed "[" of IPv6
        raise UnsupportedLedgerUrl(
            repr(url), reason=f"it is not a valid URL ({str(error)[:80]})"
        ) from None
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
    return _expanded(database)


def checked_sqlite_path(url: str | URL) -> Path | None:
    """:func:`sqlite_path`, after asking the filesystem whether such a path can exist.

    Raises:
        LedgerPathInvalid: The filesystem refuses the path (a name too long, a NUL byte...).
        LedgerUnavailable: Permission denied on the way to it.
    """
    path = sqlite_path(url)
    if path is not None:
        with filesystem_errors(str(path)):
            path.exists()
    return path


def in_memory(url: URL) -> bool:
    """A SQLite URL of an in-memory database (``sqlite://``, ``:memory:``, a ``file:`` URI with
    ``mode=memory`` or the ``memdb`` VFS): it starts empty and vanishes with its connection."""
    if url.get_backend_name() != "sqlite":
        return False
    database = url.database or ""
    if database in ("", ":memory:"):
        return True
    if not database.startswith("file:"):
        return False
    name, _, inline = database.partition("?")
    options = urllib.parse.parse_qs(inline)
    for key, value in url.query.items():
        options.setdefault(key, []).extend([value] if isinstance(value, str) else value)
    return (
        name in ("file:", "file::memory:")
        or "memory" in options.get("mode", ())
        or "memdb" in options.get("vfs", ())
    )


_PERMISSION_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


@contextmanager
def filesystem_errors(where: str) -> Iterator[None]:
    """Turn what the filesystem says about a ledger path into a typed error.

    Raises:
        LedgerUnavailable: Permission denied or a read-only filesystem.
        LedgerPathInvalid: Any other refusal (a name too long, a file on the way, a NUL byte).
    """
    try:
        yield
    except SupervisorError:
        raise
    except OSError as error:
        reason = error.strerror or type(error).__name__
        if error.errno in _PERMISSION_ERRNOS:
            raise LedgerUnavailable(
                f"The ledger at {where} cannot be used: {reason}.",
                hint="Check the ledger file's and its folder's owner and permissions.",
            ) from None
        raise LedgerPathInvalid(where, reason=reason) from None
    except ValueError:  # os functions refuse a path with an embedded NUL
        raise LedgerPathInvalid(where, reason="it contains a NUL character") from None
