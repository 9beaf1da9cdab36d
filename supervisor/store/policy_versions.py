"""Repository operations for the versions of the ledger's approval policy.

Mixed into :class:`supervisor.store.repository.LedgerTx`. Versions are only ever inserted, in
an audited write transaction (so a decision and a policy change are serialised); the highest
version is the one in force.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa
from sqlmodel import SQLModel

from supervisor.ledger.policy import POLICY_APPLY, POLICY_SUBJECT, PolicyInForce, PolicyVersion
from supervisor.ledger.policy_audit import PolicyRow
from supervisor.store.convert import (
    policy_in_force_from_row,
    policy_rows,
    policy_version_from_row,
    policy_version_to_values,
)
from supervisor.store.tables import AuditRow, PolicyVersionRow

_POLICY = SQLModel.metadata.tables[PolicyVersionRow.__tablename__]
_AUDIT = SQLModel.metadata.tables[AuditRow.__tablename__]
_LATEST_POLICY = sa.select(_POLICY).order_by(_POLICY.c.version.desc()).limit(1)
_NOT_READ = object()


def _in_force(column: sa.Column[object], label: str) -> sa.Label[object]:
    return (
        sa.select(column).order_by(_POLICY.c.version.desc()).limit(1).scalar_subquery().label(label)
    )


POLICY_IN_FORCE_COLUMNS = (
    _in_force(_POLICY.c.version, "policy_in_force"),
    _in_force(_POLICY.c.document_hash, "policy_hash"),
    _in_force(_POLICY.c.document_json, "policy_json"),
    # The newest policy_apply record: a backward range scan of ix_audit_subject (subject, seq).
    sa.select(_AUDIT.c.payload_json)
    .where(_AUDIT.c.subject == POLICY_SUBJECT, _AUDIT.c.action == POLICY_APPLY)
    .order_by(_AUDIT.c.seq.desc())
    .limit(1)
    .scalar_subquery()
    .label("policy_record"),
)
"""Scalar subqueries a write's first read adds so a decision needs no extra round trip: the
highest policy version and the payload of the newest audit record that applied one."""
_IN_FORCE = sa.select(*POLICY_IN_FORCE_COLUMNS)
_ALL_POLICIES = sa.select(_POLICY).order_by(_POLICY.c.version)
_INSERT_POLICY = sa.insert(_POLICY)


class PolicyVersionsMixin:
    """Reading and appending approval policy versions."""

    connection: sa.Connection
    _policy_read: object = _NOT_READ

    if TYPE_CHECKING:

        def _hot(self, statement: Any, params: dict[str, Any] | None = None) -> Any: ...

    def _policy_known(self) -> bool:
        """Whether this transaction has read the policy in force already."""
        return self._policy_read is not _NOT_READ

    def _keep_policy_in_force(self, row: sa.Row[Any]) -> None:
        """Remember the policy read by a statement with :data:`POLICY_IN_FORCE_COLUMNS`."""
        self._policy_read = policy_in_force_from_row(row)

    def _forget_policy_in_force(self) -> None:
        """Read the policy in force again when it is next needed."""
        self._policy_read = _NOT_READ

    def latest_policy_version(self) -> PolicyVersion | None:
        """The policy version in force (the highest), or ``None`` if none was ever stored."""
        row = self.connection.execute(_LATEST_POLICY).first()
        return policy_version_from_row(row) if row else None

    def policy_in_force(self) -> PolicyInForce:
        """The version in force as stored (number, hash, document text) and the newest
        ``policy_apply`` record, for the decision path (one statement).

        Cheaper than :meth:`latest_policy_version` (no model is built), and it gives the exact
        stored text so its hash can be checked byte for byte.
        """
        if self._policy_read is not _NOT_READ:  # read in this transaction already
            return cast(PolicyInForce, self._policy_read)
        return policy_in_force_from_row(self._hot(_IN_FORCE).one())

    def policy_versions(self) -> list[PolicyVersion]:
        """Every stored version, oldest first."""
        return [policy_version_from_row(row) for row in self.connection.execute(_ALL_POLICIES)]

    def policy_rows(self) -> list[PolicyRow]:
        """Every stored version exactly as stored (the document as text), oldest first."""
        return policy_rows(self.connection.execute(_ALL_POLICIES))

    def insert_policy_version(self, version: PolicyVersion) -> None:
        """Store a new version (its number must be the next one; the primary key enforces it)."""
        self.connection.execute(_INSERT_POLICY, policy_version_to_values(version))
        self._policy_read = _NOT_READ
