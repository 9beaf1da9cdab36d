"""Reading the recorded proposals replay needs, fast: 100k proposals in about a second.

``ApprovalLedger.list`` builds a validated :class:`~supervisor.ledger.models.Proposal` per row
(about 60 us each); replay needs a dozen columns as text, so this reads exactly those in large
keyset pages (created_at, id) inside one read transaction of the store's repository, and
leaves the JSON unparsed (replay parses each distinct call once). The proposal table is the
store's, looked up by name in the SQLModel metadata: its class stays inside ``supervisor.store``.

Calls that ended ``failed`` are checked against their audit records: a human reconciling a call
as failed (``reconcile`` with ``outcome = failed``) is a bad outcome replay flags like a
rejection; a failure the executor reported is not.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import SQLModel

from supervisor.ledger.reconcile import reconciliation_of
from supervisor.rules.replay import RecordedCall, gc_paused
from supervisor.store.repository import LedgerTx, Repository

#: Rows read per statement.
PAGE_SIZE = 5_000

#: The columns of :class:`RecordedCall`'s fields, in their order.
_COLUMNS = (
    "id", "tool_name", "arguments_json", "target_json", "domains_json", "owner", "user_id",
    "status", "created_at", "decided_at", "approver_id", "decision_reason", "supersedes_id",
    "superseded_by_id", "decided_by_rule", "policy_version",
)  # fmt: skip


_TIMES = frozenset({"created_at", "decided_at"})
_CREATED, _DECIDED = _COLUMNS.index("created_at"), _COLUMNS.index("decided_at")


def _utc(value: str | datetime | None) -> datetime | None:
    """A stored time read raw: SQLite's text (UTC, naive) or PostgreSQL's aware datetime."""
    if value is None:
        return None
    if isinstance(value, str):
        return datetime.fromisoformat(value + "+00:00")  # 4x faster than .replace(tzinfo=)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _statements(since: datetime | None) -> tuple[Any, Any]:
    """The first page's statement and the next pages' (after a key).

    The two times are read raw and converted by :func:`_utc`: the column type's own
    conversion (SQLAlchemy's text parser, then a time zone) cost 0.9 s per 100k rows.
    """
    table = SQLModel.metadata.tables["proposal"]
    query = sa.select(*[
        sa.type_coerce(table.c[name], sa.String).label(name) if name in _TIMES else table.c[name]
        for name in _COLUMNS
    ])  # fmt: skip
    key = sa.tuple_(table.c.created_at, table.c.id)
    bound = sa.tuple_(
        sa.bindparam("after_at", type_=table.c.created_at.type), sa.bindparam("after_id")
    )
    paged = query.where(key > bound)
    if since is not None:
        query = query.where(table.c.created_at >= since)
        paged = paged.where(table.c.created_at >= since)
    order = (table.c.created_at, table.c.id)
    first = query.order_by(*order).limit(sa.bindparam("page"))
    return first, paged.order_by(*order).limit(sa.bindparam("page"))


def _reconciled_failed(tx: LedgerTx, call: RecordedCall) -> RecordedCall:
    found = reconciliation_of(call.proposal_id, tx.audit_of(call.proposal_id))
    if found is None or found.outcome != "failed":
        return call
    return call._replace(reconciled_failed=(found.reconciled_by, found.reason))


@gc_paused()
def read_history(
    repository: Repository, *, since: datetime | None = None, page_size: int = PAGE_SIZE
) -> list[RecordedCall]:
    """Every proposal created at or after ``since`` (all of them: ``None``), oldest first.

    One read transaction (a consistent snapshot on SQLite; ``REPEATABLE READ`` on PostgreSQL),
    so a chain or a decision committed meanwhile is seen whole or not at all.
    """
    first, paged = _statements(since)
    calls: list[RecordedCall] = []
    with repository.read(snapshot=True) as tx:
        params: dict[str, Any] = {"page": page_size}
        rows = tx.connection.execute(first, params).all()
        while rows:
            for row in rows:  # columns in field order
                values = list(row)
                values[_CREATED], values[_DECIDED] = _utc(row[_CREATED]), _utc(row[_DECIDED])
                calls.append(RecordedCall(*values))
            if len(rows) < page_size:
                break
            last = calls[-1]
            rows = tx.connection.execute(
                paged, {**params, "after_at": last.created_at, "after_id": last.proposal_id}
            ).all()
        for index, call in enumerate(calls):
            if call.status == "failed":
                calls[index] = _reconciled_failed(tx, call)
    return calls
