"""Alembic environment: always run with a live connection passed in by ``supervisor.store``."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError(
        "Ledger migrations run from supervisor.store.migrate.upgrade(), not the alembic CLI."
    )

context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
