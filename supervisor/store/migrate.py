"""Schema migrations applied on open, serialised across processes and hosts.

The upgrade runs inside one write transaction: ``BEGIN IMMEDIATE`` on SQLite,
``pg_advisory_xact_lock`` on PostgreSQL. A second process opening a fresh ledger waits, then
finds the schema current and does nothing. Both engines have transactional DDL, so a failed
upgrade leaves the previous schema intact.
"""

from __future__ import annotations

import time
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from supervisor.ledger.errors import LedgerBusy, LedgerSchemaTooNew
from supervisor.store.engine import WRITE_OPTION
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
    """The ledger's schema version, or ``None`` for a ledger that has no schema yet."""
    if not sa.inspect(connection).has_table("ledger_meta"):
        return None
    value = connection.execute(
        sa.text("SELECT value FROM ledger_meta WHERE key = 'schema_version'")
    ).scalar_one_or_none()
    return int(value) if value is not None else None


def _check_not_too_new(found: int | None, engine: Engine) -> None:
    if found is not None and found > SCHEMA_VERSION:
        raise LedgerSchemaTooNew(
            found=found,
            supported=SCHEMA_VERSION,
            url=engine.url.render_as_string(hide_password=True),
        )


def ensure_schema(engine: Engine) -> int:
    """Bring the ledger to this code's schema, creating it if needed.

    Args:
        engine: An engine from :func:`supervisor.store.engine.create_ledger_engine`.

    Returns:
        The schema version now in the ledger.

    Raises:
        LedgerSchemaTooNew: The ledger was written by a newer release.
        LedgerBusy: Another writer held the lock past the busy timeout.
        LedgerUnavailable: The database cannot be reached or written.
    """
    # Processes opening a fresh SQLite ledger at the same moment can see an immediate "database
    # is locked" (SQLite skips the busy handler where waiting could deadlock); the schema step
    # is idempotent, so it is retried with backoff until the busy timeout.
    deadline = time.monotonic() + RETRY_SECONDS
    delay = 0.02
    while True:
        try:
            return _ensure_schema_once(engine)
        except LedgerBusy:
            if time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def _ensure_schema_once(engine: Engine) -> int:
    with translate_errors():
        with engine.connect() as connection:
            found = stored_schema_version(connection)
            connection.rollback()
        _check_not_too_new(found, engine)
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
