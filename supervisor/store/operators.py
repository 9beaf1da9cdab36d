"""Repository operations for web operators (mixed into ``LedgerTx``).

A revoke is one conditional ``UPDATE`` checked by its row count; token hashes are read only by
:meth:`OperatorsMixin.active_operator_hashes`, for the login check.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlmodel import SQLModel

from supervisor.ledger.operator_tokens import Operator
from supervisor.store.operator_table import OperatorRow

_OPERATOR = SQLModel.metadata.tables[OperatorRow.__tablename__]


def _operator(row: Any) -> Operator:
    return Operator(
        name=row.name, created_at=row.created_at, created_by=row.created_by,
        revoked_at=row.revoked_at, last_login_at=row.last_login_at,
    )  # fmt: skip


class OperatorsMixin:
    """Operator persistence."""

    if TYPE_CHECKING:

        def _execute(self, statement: Any, params: Any = None) -> sa.CursorResult[Any]: ...

    def insert_operator(self, operator: Operator, token_hash: str) -> None:
        self._execute(
            sa.insert(_OPERATOR).values(
                name=operator.name, token_hash=token_hash, created_at=operator.created_at,
                created_by=operator.created_by,
            )
        )  # fmt: skip

    def operator(self, name: str) -> Operator | None:
        row = self._execute(sa.select(_OPERATOR).where(_OPERATOR.c.name == name)).first()
        return _operator(row) if row else None

    def operators(self) -> list[Operator]:
        """Every operator (revoked ones too), by name."""
        return [_operator(row) for row in self._execute(sa.select(_OPERATOR).order_by("name"))]

    def active_operator_hashes(self) -> list[tuple[str, str]]:
        """``(name, token_hash)`` of every operator not revoked."""
        query = sa.select(_OPERATOR.c.name, _OPERATOR.c.token_hash).where(
            _OPERATOR.c.revoked_at.is_(None)
        )
        return [(row.name, row.token_hash) for row in self._execute(query)]

    def revoke_operator(self, name: str, now: datetime) -> bool:
        """Revoke an operator not revoked yet; False when none such exists."""
        result = self._execute(
            sa.update(_OPERATOR)
            .where(_OPERATOR.c.name == name, _OPERATOR.c.revoked_at.is_(None))
            .values(revoked_at=now)
        )
        return result.rowcount == 1

    def touch_operator_login(self, name: str, now: datetime) -> None:
        self._execute(
            sa.update(_OPERATOR).where(_OPERATOR.c.name == name).values(last_login_at=now)
        )
