"""Web operators on the ledger: add (token shown once), list, revoke, authenticate.

Adding and revoking are audited (subject ``operator:<name>``, never the token or its hash), so
``audit verify`` covers who could decide from the web and since when.
"""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.ledger.base import LedgerBase
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.operator_tokens import (
    OPERATOR_ADD,
    OPERATOR_REVOKE,
    OPERATOR_SUBJECT_PREFIX,
    InvalidOperatorToken,
    Operator,
    OperatorExists,
    OperatorNotFound,
    check_name,
    hash_matches,
    new_token,
    token_hash,
)


@dataclass(frozen=True)
class NewOperator:
    """An operator just made and its login token (the only time the token exists in clear)."""

    operator: Operator
    token: str


class OperatorsMixin(LedgerBase):
    """``add_operator``, ``operators``, ``operator``, ``revoke_operator``, ``authenticate``."""

    def add_operator(self, name: str) -> NewOperator:
        """Make an operator named ``name`` with a fresh login token.

        Raises:
            InvalidOperatorName: ``name`` is not a short lower-case word.
            OperatorExists: An operator (even a revoked one) already has that name.
        """
        check_name(name)
        identity = str(EnvironmentIdentity.current())
        token = new_token()
        with self.repository.write() as tx:
            if tx.operator(name) is not None:
                raise OperatorExists(name)
            now = self._now()
            operator = Operator(name=name, created_at=now, created_by=identity)
            tx.insert_operator(operator, token_hash(token))
            tx.append_audit(
                at=now, actor=identity, action=OPERATOR_ADD,
                subject=OPERATOR_SUBJECT_PREFIX + name, payload={"name": name},
            )  # fmt: skip
        return NewOperator(operator, token)

    def operators(self) -> list[Operator]:
        """Every operator, revoked ones too, by name."""
        with self.repository.read() as tx:
            return tx.operators()

    def operator(self, name: str) -> Operator | None:
        """The operator named ``name`` (revoked or not), if any."""
        with self.repository.read() as tx:
            return tx.operator(name)

    def revoke_operator(self, name: str) -> Operator:
        """Revoke ``name``: its token and every session of it stop working.

        Raises:
            OperatorNotFound: No active operator has that name.
        """
        identity = str(EnvironmentIdentity.current())
        with self.repository.write() as tx:
            now = self._now()
            if not tx.revoke_operator(name, now):
                raise OperatorNotFound(name)
            tx.append_audit(
                at=now, actor=identity, action=OPERATOR_REVOKE,
                subject=OPERATOR_SUBJECT_PREFIX + name, payload={"name": name},
            )  # fmt: skip
            revoked = tx.operator(name)
        assert revoked is not None
        return revoked

    def authenticate(self, token: str) -> Operator:
        """The active operator whose token is ``token``; records the login time.

        Every active operator's hash is compared (in constant time, without stopping at a
        match), so the time taken says nothing about which one matched.

        Raises:
            InvalidOperatorToken: No active operator has this token.
        """
        with self.repository.read() as tx:
            hashes = tx.active_operator_hashes()
        matched: str | None = None
        for name, stored in hashes:
            if hash_matches(token, stored):
                matched = name
        if matched is None:
            raise InvalidOperatorToken()
        with self.repository.write(audited=False) as tx:
            tx.touch_operator_login(matched, self._now())
            found = tx.operator(matched)
        if found is None or not found.active:
            raise InvalidOperatorToken()
        return found
