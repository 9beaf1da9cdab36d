"""Schema migrations applied on open, serialised across processes and hosts.

The upgrade runs inside one write transaction: ``BEGIN IMMEDIATE`` on SQLite,
``pg_advisory_xact_lock`` on PostgreSQL. A second process opening a fresh ledger waits, then
finds the schema current and does nothing. Both engines have transactional DDL, so a failed
upgrade leaves the previous schema intact. A ledger opened read-only is only checked
(:func:`check_schema`): it must hold this code's schema, since migrating would write.
"""

from __future__ import annotations

import time
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from supervisor.ledger.errors import (
    LedgerBusy,
    LedgerCorrupt,
    LedgerSchemaTooNew,
    LedgerSchemaTooOld,
    NotALedger,
)
from supervisor.store.engine import WRITE_OPTION, shown_url
from supervisor.store.errors import translate_errors
from supervisor.store.tables import SCHEMA_VERSION

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
RETRY_SECONDS = 30.0
MIGRATION_LOCK_KEY = 0x5355_5056_4D49_4731  # "SUPVMIG1"


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Run the migrations up to ``revision`` on ``connection`` (inside its transaction)."""
    # Alembic is imported only when a ledger actually needs migrating (it is slow to import).
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


def stored_schema_version(connection: Connection) -> int | None:
    """The ledger's schema version, or ``None`` for a database that is empty (no tables).

    Raises:
        NotALedger: The database holds tables but no ``ledger_meta``: it belongs to something
            else, and migrating it would mix the ledger's tables into it (or clash with them).
        LedgerCorrupt: ``ledger_meta`` holds no schema version, or one that is not a positive
            integer.
    """
    inspector = sa.inspect(connection)
    # One catalog read decides: on PostgreSQL each statement sees its own snapshot, so asking
    # "is there a ledger_meta?" and then "which tables are there?" could straddle another
    # process's migration commit and take a fresh ledger for someone else's database.
    tables = set(inspector.get_table_names())
    if "ledger_meta" not in tables:
        found = sorted(tables) or sorted(inspector.get_view_names())
        if found:
            listed = ", ".join(repr(name[:40]) for name in found[:3])
            more = f" and {len(found) - 3} more" if len(found) > 3 else ""
            raise NotALedger(
                shown_url(connection.engine.url),
                reason=f"it holds other tables ({listed}{more}) and no ledger_meta",
            )
        return None
    value = connection.execute(
        sa.text("SELECT value FROM ledger_meta WHERE key = 'schema_version'")
    ).scalar_one_or_none()
    if value is None:
        raise LedgerCorrupt(
            shown_url(connection.engine.url), reason="its ledger_meta holds no schema version"
        )
    text = str(value)
    if not (text.isascii() and text.isdecimal()) or int(text) < 1:
        raise LedgerCorrupt(
            shown_url(connection.engine.url),
            reason=f"its schema version in ledger_meta is {text[:40]!r}, not a positive integer",
        )
    return int(text)


def _check_not_too_new(found: int | None, engine: Engine) -> None:
    if found is not None and found > SCHEMA_VERSION:
        raise LedgerSchemaTooNew(found=found, supported=SCHEMA_VERSION, url=shown_url(engine.url))


def check_schema(engine: Engine) -> int:
    """Check, without writing, that the ledger holds exactly this code's schema.

    Args:
        engine: A read-only engine (``create_ledger_engine(..., read_only=True)``).

    Returns:
        The schema version.

    Raises:
        NotALedger: The database has no ledger tables (or is not a SQLite database).
        LedgerCorrupt: The file is damaged or its schema version unreadable.
        LedgerSchemaTooNew: The ledger was written by a newer release.
        LedgerSchemaTooOld: The ledger needs a migration, which a read-only open never runs.
        LedgerUnavailable: The database cannot be reached.
    """
    where = shown_url(engine.url)
    with translate_errors(where), engine.connect() as connection:
        found = stored_schema_version(connection)
        connection.rollback()
    if found is None:
        raise NotALedger(where, reason="it holds no ledger tables")
    _check_not_too_new(found, engine)
    if found < SCHEMA_VERSION:
        raise LedgerSchemaTooOld(where, found=found, supported=SCHEMA_VERSION)
    return found


def ensure_schema(engine: Engine, *, create: bool = True) -> int:
    """Bring the ledger to this code's schema, creating it if needed.

    Args:
        engine: An engine from :func:`supervisor.store.engine.create_ledger_engine`.
        create: Create the schema in a database that has none; ``False`` refuses such a
            database with ``NotALedger`` (an existing ledger is still migrated).

    Returns:
        The schema version now in the ledger.

    Raises:
        LedgerSchemaTooNew: The ledger was written by a newer release.
        LedgerBusy: Another writer held the lock past the busy timeout.
        LedgerUnavailable: The database cannot be reached or written.
        NotALedger: ``create`` is false and the database holds no ledger, or the file is not a
            SQLite database.
        LedgerCorrupt: The file is damaged or its schema version unreadable.
    """
    # Processes opening a fresh SQLite ledger at the same moment can see an immediate "database
    # is locked" (SQLite skips the busy handler where waiting could deadlock); the schema step
    # is idempotent, so it is retried with backoff until the busy timeout.
    deadline = time.monotonic() + RETRY_SECONDS
    delay = 0.02
    while True:
        try:
            return _ensure_schema_once(engine, create)
        except LedgerBusy:
            if time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def _ensure_schema_once(engine: Engine, create: bool) -> int:
    where = shown_url(engine.url)
    with translate_errors(where):
        with engine.connect() as connection:
            found = stored_schema_version(connection)
            connection.rollback()
        _check_not_too_new(found, engine)
        if found is None and not create:
            raise NotALedger(where, reason="it holds no ledger tables")
        if found == SCHEMA_VERSION:
            return found
        with engine.connect() as connection:
            connection = connection.execution_options(**{WRITE_OPTION: True})
            with connection.begin():
                if connection.dialect.name == "postgresql":
                    connection.execute(
                        sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
                    )
                found = stored_schema_version(connection)
                _check_not_too_new(found, engine)
                if found != SCHEMA_VERSION:
                    upgrade(connection)
                found = stored_schema_version(connection)
        return found if found is not None else SCHEMA_VERSION
