"""Repository operations for the versions of the ledger's approval policy.

Mixed into :class:`supervisor.store.repository.LedgerTx`. Versions are only ever inserted, in
an audited write transaction (so a decision and a policy change are serialised); the highest
version is the one in force.
"""

from __future__ import annotations

from typing import Any, cast

import sqlalchemy as sa
from sqlmodel import SQLModel

from supervisor.ledger.policy import PolicyVersion, StoredPolicy
from supervisor.store.convert import policy_version_from_row, policy_version_to_values
from supervisor.store.tables import PolicyVersionRow

_POLICY = SQLModel.metadata.tables[PolicyVersionRow.__tablename__]
_LATEST_POLICY = sa.select(_POLICY).order_by(_POLICY.c.version.desc()).limit(1)
_IN_FORCE = (
    sa.select(_POLICY.c.version, _POLICY.c.document_hash, _POLICY.c.document_json)
    .order_by(_POLICY.c.version.desc())
    .limit(1)
)
_NOT_READ = object()


def _in_force(column: sa.Column[object], label: str) -> sa.Label[object]:
    return (
        sa.select(column).order_by(_POLICY.c.version.desc()).limit(1).scalar_subquery().label(label)
    )


POLICY_IN_FORCE_COLUMNS = (
    _in_force(_POLICY.c.version, "policy_version"),
    _in_force(_POLICY.c.document_hash, "policy_hash"),
    _in_force(_POLICY.c.document_json, "policy_json"),
)
"""Scalar subqueries a write's first read adds so a decision needs no extra round trip."""
_ALL_POLICIES = sa.select(_POLICY).order_by(_POLICY.c.version)
_INSERT_POLICY = sa.insert(_POLICY)


class PolicyVersionsMixin:
    """Reading and appending approval policy versions."""

    connection: sa.Connection
    _policy_read: object = _NOT_READ

    def _keep_policy_in_force(self, row: sa.Row[Any]) -> None:
        """Remember the policy read by a statement with :data:`POLICY_IN_FORCE_COLUMNS`."""
        self._policy_read = (
            StoredPolicy(row.policy_version, row.policy_hash, row.policy_json)
            if row.policy_version is not None
            else None
        )

    def latest_policy_version(self) -> PolicyVersion | None:
        """The policy version in force (the highest), or ``None`` if none was ever stored."""
        row = self.connection.execute(_LATEST_POLICY).first()
        return policy_version_from_row(row) if row else None

    def policy_in_force(self) -> StoredPolicy | None:
        """The version in force as stored (number, hash, document text), for the decision path.

        Cheaper than :meth:`latest_policy_version` (no model is built), and it gives the exact
        stored text so its hash can be checked byte for byte.
        """
        if self._policy_read is not _NOT_READ:  # read in this transaction already
            return cast(StoredPolicy | None, self._policy_read)
        row = self.connection.execute(_IN_FORCE).first()
        return StoredPolicy(row.version, row.document_hash, row.document_json) if row else None

    def policy_versions(self) -> list[PolicyVersion]:
        """Every stored version, oldest first."""
        return [policy_version_from_row(row) for row in self.connection.execute(_ALL_POLICIES)]

    def insert_policy_version(self, version: PolicyVersion) -> None:
        """Store a new version (its number must be the next one; the primary key enforces it)."""
        self.connection.execute(_INSERT_POLICY, policy_version_to_values(version))
        self._policy_read = _NOT_READ
