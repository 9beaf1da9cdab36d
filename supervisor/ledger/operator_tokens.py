"""Named web operators and their login tokens: the pure rules, no I/O.

An operator is a person who decides from ``supervisor serve``. ``operators add NAME`` makes a
high-entropy token, shows it once and stores only its SHA-256; a login compares the hash of
what was typed with every live operator's hash in constant time. A revoked operator's token
and sessions stop working at once (every request re-reads the operator).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from supervisor.ledger.errors import LedgerError

OPERATOR_SUBJECT_PREFIX = "operator:"
"""Audit subjects of operator records are ``operator:<name>``."""
OPERATOR_ADD = "operator_add"
OPERATOR_REVOKE = "operator_revoke"
TOKEN_PREFIX = "sot_"
"""Every operator token starts with this, so a leaked one is easy to recognise and search for."""
_TOKEN_BYTES = 32
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


class Operator(BaseModel):
    """One operator as stored (never with the token; its hash stays in the store).

    Attributes:
        name: Lower-case login name, recorded as the approver of the web decisions.
        created_at: When ``operators add`` made it.
        created_by: The OS identity (``user@host``) that made it.
        revoked_at: Set once revoked; a revoked operator cannot log in or decide.
        last_login_at: The last successful login.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    created_at: datetime
    created_by: str
    revoked_at: datetime | None = None
    last_login_at: datetime | None = None

    @property
    def active(self) -> bool:
        """True until revoked."""
        return self.revoked_at is None


def new_token() -> str:
    """A fresh login token: the prefix and 256 random bits, URL-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(_TOKEN_BYTES)


def token_hash(token: str) -> str:
    """SHA-256 (hex) of a token; the only form the ledger stores."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def hash_matches(token: str, stored_hash: str) -> bool:
    """Whether ``token`` hashes to ``stored_hash``, compared in constant time."""
    return hmac.compare_digest(token_hash(token), stored_hash)


def check_name(name: str) -> str:
    """``name`` if it is a valid operator name.

    Raises:
        InvalidOperatorName: Not 1-64 characters of ``a-z 0-9 . _ -`` starting with a letter
            or digit.
    """
    if not _NAME.fullmatch(name):
        raise InvalidOperatorName(name)
    return name


class OperatorError(LedgerError):
    """Base of the operator errors."""

    code = "operator_error"


class InvalidOperatorName(OperatorError, ValueError):
    """An operator name that is not a short lower-case word."""

    code = "invalid_operator_name"

    def __init__(self, name: str) -> None:
        super().__init__(
            f"{name!r} is not an operator name; nothing was changed.",
            hint="Use 1-64 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or "
            "digit (e.g. 'ada' or 'ada.lovelace').",
        )


class OperatorExists(OperatorError):
    """``operators add`` named an operator that already exists (revoked ones too)."""

    code = "operator_exists"

    def __init__(self, name: str) -> None:
        super().__init__(
            f"Operator {name!r} already exists; no token was made.",
            hint="Pick another name, or `supervisor operators list` to see who exists.",
            name=name,
        )


class OperatorNotFound(OperatorError, LookupError):
    """No live operator has that name."""

    code = "operator_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(
            f"No active operator is named {name!r}; nothing was changed.",
            hint="`supervisor operators list` shows the operators and who is revoked.",
            name=name,
        )


class InvalidOperatorToken(OperatorError, PermissionError):
    """A login token that belongs to no active operator (wrong, revoked or mistyped)."""

    code = "invalid_operator_token"

    def __init__(self) -> None:
        super().__init__(
            "That token does not belong to an active operator.",
            hint="Paste the whole token `supervisor operators add NAME` printed; a revoked "
            "operator needs a new name and token.",
        )
