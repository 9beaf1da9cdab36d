"""The ledger's stored approval policy: read it, list its versions, apply a new one."""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.ledger.base import LedgerBase
from supervisor.ledger.models import Via
from supervisor.ledger.policy import NO_POLICY, ApprovalPolicy, PolicyVersion


@dataclass(frozen=True)
class PolicyChange:
    """What :meth:`PolicyMixin.apply_policy` did.

    Attributes:
        version: The version in force afterwards (``None``: the ledger still has no policy).
        changed: True when a new version was stored (and audited).
    """

    version: PolicyVersion | None
    changed: bool


class PolicyMixin(LedgerBase):
    """``current_policy``, ``policy_history`` and ``apply_policy``."""

    def current_policy(self) -> PolicyVersion | None:
        """The stored policy version in force, or ``None`` when the ledger has none."""
        with self.repository.read() as tx:
            return tx.latest_policy_version()

    def policy_history(self) -> list[PolicyVersion]:
        """Every stored policy version, oldest first."""
        with self.repository.read() as tx:
            return tx.policy_versions()

    def apply_policy(
        self, policy: ApprovalPolicy, *, reason: str | None = None, via: Via = "sdk"
    ) -> PolicyChange:
        """Make ``policy`` the ledger's policy for every process, as a new audited version.

        The version names this process's OS identity (``user@host``) as who applied it. It is
        written in an audited write transaction, so it is serialised with every decision: a
        decision committed after it is checked against it. Applying the policy already in
        force stores nothing.

        Args:
            policy: The new policy.
            reason: Why (stored and audited).
            via: The channel (sdk, cli, tui).

        Returns:
            The version in force afterwards and whether it is new.
        """
        with self.repository.write() as tx:
            stored = tx.latest_policy_version()
            in_force = stored.document_hash if stored else NO_POLICY.document_hash
            if policy.document_hash == in_force:
                return PolicyChange(stored, changed=False)
            version = self._store_policy(tx, policy, previous=stored, via=via, reason=reason)
        return PolicyChange(version, changed=True)
