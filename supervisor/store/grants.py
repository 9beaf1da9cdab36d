"""Repository operations for grants. Mixed into :class:`supervisor.store.repository.LedgerTx`.

A use and a revoke are each one conditional ``UPDATE`` checked by its row count, inside the
serialised write transaction of the call they belong to: a grant revoked (or used up) in a
transaction that committed first allows nothing after it.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlmodel import SQLModel

from supervisor.canonical import canonical_json
from supervisor.ledger.grants import GRANT_CREATE, GRANT_SUBJECT_PREFIX, Grant
from supervisor.store.tables import AuditRow, GrantRow
from supervisor.store.transaction import GuardCondition

_GRANT = SQLModel.metadata.tables[GrantRow.__tablename__]
#: The runtime asks this on every proposal of a grantable tool: built once.
_LIVE_GRANTS_OF_TOOL = (
    sa.select(_GRANT)
    .where(
        _GRANT.c.tool_name == sa.bindparam("tool_name"),
        _GRANT.c.revoked_at.is_(None),
        _GRANT.c.expires_at > sa.bindparam("live_at", type_=_GRANT.c.expires_at.type),
    )
    .order_by(_GRANT.c.created_at.desc(), _GRANT.c.id)
)
# Whether a tool has a live grant, with the same predicate as _LIVE_GRANTS_OF_TOOL: a column a
# call's first read adds (LedgerTx.policy_in_force), so that a call to a tool without live
# grants makes no grants read (one round trip fewer while a propose holds the chain lock).
LIVE_GRANT_PROBE = (
    sa.exists()
    .where(
        _GRANT.c.tool_name == sa.bindparam("probe_tool"),
        _GRANT.c.revoked_at.is_(None),
        _GRANT.c.expires_at > sa.bindparam("probe_at", type_=_GRANT.c.expires_at.type),
    )
    .label("live_grant")
)
# A guard for a call read before a late chain lock (see TransactionBase): the tool still has
# no live grant, with the same predicate (checked in the same statement as the subjects).
NO_LIVE_GRANT_GUARD = GuardCondition(
    f"NOT EXISTS (SELECT 1 FROM {_GRANT.name} WHERE tool_name = :probe_tool"
    " AND revoked_at IS NULL AND expires_at > :probe_at)",
    (("probe_at", _GRANT.c.expires_at.type),),
)
_AUDIT = SQLModel.metadata.tables[AuditRow.__tablename__]


def _grant(row: Any) -> Grant:
    return Grant(
        grant_id=row.id, tool_name=row.tool_name, schema_hash=row.schema_hash,
        target_hash=row.target_hash, owner=row.owner, arguments=json.loads(row.arguments_json),
        created_by=row.created_by, approver_id=row.approver_id, created_at=row.created_at,
        expires_at=row.expires_at, max_uses=row.max_uses, uses=row.uses,
        revoked_at=row.revoked_at, revoked_by=row.revoked_by, revoke_reason=row.revoke_reason,
        source_proposal_id=row.source_proposal_id, reason=row.reason,
        document_hash=row.document_hash,
    )  # fmt: skip


class GrantsMixin:
    """Grant persistence."""

    _grant_probe: tuple[str, datetime] | None = None
    _no_live_grants: tuple[str, datetime] | None = None

    if TYPE_CHECKING:

        def _execute(self, statement: Any, params: Any = None) -> sa.CursorResult[Any]: ...

        def _hot(self, statement: Any, params: dict[str, Any] | None = None) -> Any: ...

    def probe_grants(self, tool_name: str, live_at: datetime) -> None:
        """Ask the transaction's first read to say whether ``tool_name`` has grants live at
        ``live_at``; when it has none, :meth:`grants` for the same two answers without a read.
        (The answer holds for the transaction: every grant change is an audited write, and an
        audited write holds the chain lock from its first statement.)"""
        self._grant_probe = (tool_name, live_at)

    def _keep_grant_probe(self, live: bool) -> None:
        if not live:
            self._no_live_grants = self._grant_probe

    def insert_grant(self, grant: Grant) -> None:
        self._no_live_grants = None
        self._execute(
            sa.insert(_GRANT).values(
                id=grant.grant_id, tool_name=grant.tool_name, schema_hash=grant.schema_hash,
                target_hash=grant.target_hash, owner=grant.owner,
                arguments_json=canonical_json(grant.arguments), created_by=grant.created_by,
                approver_id=grant.approver_id, created_at=grant.created_at,
                expires_at=grant.expires_at, max_uses=grant.max_uses, uses=grant.uses,
                source_proposal_id=grant.source_proposal_id, reason=grant.reason,
                document_hash=grant.document_hash,
            )
        )  # fmt: skip

    def grant(self, grant_id: str) -> Grant | None:
        row = self._execute(sa.select(_GRANT).where(_GRANT.c.id == grant_id)).first()
        return _grant(row) if row else None

    def grants(
        self, *, tool_name: str | None = None, live_at: datetime | None = None
    ) -> list[Grant]:
        """Grants, newest first; ``live_at``: only those neither revoked nor expired then."""
        if tool_name is not None and live_at is not None:
            if self._no_live_grants == (tool_name, live_at):
                return []
            rows = self._hot(_LIVE_GRANTS_OF_TOOL, {"tool_name": tool_name, "live_at": live_at})
            return [_grant(row) for row in rows]
        query = sa.select(_GRANT).order_by(_GRANT.c.created_at.desc(), _GRANT.c.id)
        if tool_name is not None:
            query = query.where(_GRANT.c.tool_name == tool_name)
        if live_at is not None:
            query = query.where(_GRANT.c.revoked_at.is_(None), _GRANT.c.expires_at > live_at)
        return [_grant(row) for row in self._execute(query)]

    def grant_record_hash(self, grant_id: str) -> str | None:
        """The document hash the ``grant_create`` audit record of ``grant_id`` holds."""
        row = self._execute(
            sa.select(_AUDIT.c.payload_json)
            .where(
                _AUDIT.c.subject == GRANT_SUBJECT_PREFIX + grant_id,
                _AUDIT.c.action == GRANT_CREATE,
            )
            .limit(1)
        ).first()
        if row is None:
            return None
        try:
            value = json.loads(row.payload_json).get("document_hash")
        except (ValueError, AttributeError):
            return None
        return value if isinstance(value, str) else None

    def use_grant(self, grant_id: str, now: datetime) -> bool:
        """Count one use; False when it is revoked, expired or used up (nothing changes)."""
        result = self._execute(
            sa.update(_GRANT)
            .where(
                _GRANT.c.id == grant_id, _GRANT.c.revoked_at.is_(None),
                _GRANT.c.expires_at > now, _GRANT.c.uses < _GRANT.c.max_uses,
            )
            .values(uses=_GRANT.c.uses + 1)
        )  # fmt: skip
        return result.rowcount == 1

    def revoke_grant(self, grant_id: str, now: datetime, by: str, reason: str) -> bool:
        """Revoke a grant not revoked yet; False when it already was (or does not exist)."""
        result = self._execute(
            sa.update(_GRANT)
            .where(_GRANT.c.id == grant_id, _GRANT.c.revoked_at.is_(None))
            .values(revoked_at=now, revoked_by=by, revoke_reason=reason)
        )
        return result.rowcount == 1
