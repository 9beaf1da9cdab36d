"""Repository operations for the versions of the ledger's approval policy.

Mixed into :class:`supervisor.store.repository.LedgerTx`. Versions are only ever inserted, in
an audited write transaction (so a decision and a policy change are serialised); the highest
version is the one in force.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import SQLModel

from supervisor.ledger.policy import PolicyVersion
from supervisor.store.convert import policy_version_from_row, policy_version_to_values
from supervisor.store.tables import PolicyVersionRow

_POLICY = SQLModel.metadata.tables[PolicyVersionRow.__tablename__]
_LATEST_POLICY = sa.select(_POLICY).order_by(_POLICY.c.version.desc()).limit(1)
_ALL_POLICIES = sa.select(_POLICY).order_by(_POLICY.c.version)
_INSERT_POLICY = sa.insert(_POLICY)


class PolicyVersionsMixin:
    """Reading and appending approval policy versions."""

    connection: sa.Connection

    def latest_policy_version(self) -> PolicyVersion | None:
        """The policy version in force (the highest), or ``None`` if none was ever stored."""
        row = self.connection.execute(_LATEST_POLICY).first()
        return policy_version_from_row(row) if row else None

    def policy_versions(self) -> list[PolicyVersion]:
        """Every stored version, oldest first."""
        return [policy_version_from_row(row) for row in self.connection.execute(_ALL_POLICIES)]

    def insert_policy_version(self, version: PolicyVersion) -> None:
        """Store a new version (its number must be the next one; the primary key enforces it)."""
        self.connection.execute(_INSERT_POLICY, policy_version_to_values(version))
