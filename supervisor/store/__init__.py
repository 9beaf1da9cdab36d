"""Storage edge of the ledger: tables, engine factory, migrations and the repository."""

from __future__ import annotations

from supervisor.store import cache_table as _cache_table  # noqa: F401 - registers the table
from supervisor.store import lease_tables as _lease_tables  # noqa: F401 - registers the tables
from supervisor.store import operator_table as _operator_table  # noqa: F401 - registers the table
from supervisor.store import pointer_table as _pointer_table  # noqa: F401 - registers the table
from supervisor.store import webhook_tables as _webhook_tables  # noqa: F401 - registers the tables
from supervisor.store.engine import create_ledger_engine, default_ledger_path, resolve_url
from supervisor.store.migrate import ensure_schema
from supervisor.store.repository import Repository

__all__ = [
    "Repository",
    "create_ledger_engine",
    "default_ledger_path",
    "ensure_schema",
    "resolve_url",
]
