"""Ids by their first characters, for people typing them. Mixed into
:class:`supervisor.store.repository.LedgerTx`.

A prefix is compared with ``substr`` (byte-exact and case-sensitive on both engines; ``LIKE``
is case-insensitive on SQLite and would need its wildcards escaped), after the exact id was
looked up by its primary key, so a full id never scans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa
from sqlmodel import SQLModel

from supervisor.store.tables import GrantRow, ProposalRow
from supervisor.store.webhook_tables import WebhookRow

IdKind = Literal["proposal", "grant", "webhook"]

_TABLES = {
    "proposal": SQLModel.metadata.tables[ProposalRow.__tablename__],
    "grant": SQLModel.metadata.tables[GrantRow.__tablename__],
    "webhook": SQLModel.metadata.tables[WebhookRow.__tablename__],
}
#: What a candidate is said to be: its tool, or a webhook's format (never its URL, which may
#: hold credentials).
_WHAT = {"proposal": "tool_name", "grant": "tool_name", "webhook": "format"}


class IdsMixin:
    """Finding ids by prefix."""

    if TYPE_CHECKING:

        def _execute(self, statement: Any, params: Any = None) -> sa.CursorResult[Any]: ...

    def ids_starting(self, kind: IdKind, prefix: str, limit: int) -> list[tuple[str, str]]:
        """``(id, what it is)`` of up to ``limit`` rows whose id is or starts with ``prefix``
        (the exact id alone when there is one), oldest first."""
        table = _TABLES[kind]
        what = table.c[_WHAT[kind]].label("what")
        exact = self._execute(sa.select(table.c.id, what).where(table.c.id == prefix)).first()
        if exact is not None:
            return [(str(exact.id), str(exact.what))]
        query = (
            sa.select(table.c.id, what)
            .where(sa.func.substr(table.c.id, 1, len(prefix)) == prefix)
            .order_by(table.c.created_at, table.c.id)
            .limit(limit)
        )
        return [(str(row.id), str(row.what)) for row in self._execute(query)]
