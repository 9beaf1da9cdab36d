"""Redaction of secrets from text bound for traces, logs and read-only views.

Two passes, in this order:

1. **Known values** (exact): secrets this process knows — the configured API key, credentials
   of a ``base_url``, arguments a tool marks secret, a browser task's ``sensitive_data`` — and
   the values of environment variables whose names say KEY, TOKEN, SECRET or PASSWORD. A known
   value is replaced wherever it appears, whatever its shape.
2. **Patterns** (best effort): API keys and bearer tokens by shape, private key (PEM) blocks,
   credential headers (``Authorization:``, ``Cookie:``, ``X-Api-Key:``...), ``name=value``
   assignments whose name says key/token/secret/password, credential query parameters,
   passwords in URLs, PINs and one-time codes next to their label, "the password is ...",
   IBANs (checked with their mod-97 checksum) and runs of 12 or more BIP-39 words (seed
   phrases). A secret with none of these shapes and not known to the process is not found:
   pattern redaction can never be complete.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 4
"""Known values shorter than this are not replaced: too short to find without mangling text."""

_PEM_BLOCK = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
    re.DOTALL,
)
_PATTERNS = (
    _PEM_BLOCK,
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]+=*"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
)
_HEADER = re.compile(
    r"(?im)\b((?:proxy-)?authorization|(?:set-)?cookie|x-api-key|api-key|x-auth-token|"
    r"x-access-token|x-csrf-token|x-xsrf-token|x-amz-security-token|x-goog-api-key)"
    r"([ \t]*:[ \t]*)([^\r\n]+)"
)
_QUERY = re.compile(
    r"(?i)([?&](?:key|sig|signature|auth|code|session|sid|access_token|refresh_token|"
    r"api-key|apikey|password|token)=)[^&\s#\"']+"
)
_PHRASE = re.compile(
    r"(?i)\b((?:password|passphrase|passcode|passwd|pin|secret)\s+(?:is|was|will\s+be)"
    r"\s*:?\s*)(\"[^\"]*\"|'[^']*'|\S+)"
)
_ASSIGNMENT = re.compile(
    r"(?i)\b([\w.-]*(?:api[_-]?key|token|secret|password|passwd|pwd|authorization|credential)"
    r"[\w.-]*)(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
)
_PIN = re.compile(r"(?i)\b(pin(?:[ _-]?(?:code|number))?)(\s*(?:[:=#]|is|was)?\s*)(\d{4,8})\b")
_OTP = re.compile(
    r"(?i)\b(otp|totp|one[ -]time[ -](?:password|passcode|code)|(?:verification|security|"
    r"confirmation|2fa|mfa|auth(?:entication)?|login|sms)[ -]code)"
    r"(\s*(?:[:=#]|is|was)?\s*)(\d{4,8})\b"
)
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_WORD_RUN = re.compile(r"\b[a-z]{3,8}(?:[ \t\r\n]+[a-z]{3,8}){11,}\b")
_WORD = re.compile(r"[a-z]+")
SEED_PHRASE_WORDS = 12
"""A run of at least this many BIP-39 words is taken for a seed phrase."""
_SECRET_ENV_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)")


def _secret_env_values(environ: Mapping[str, str]) -> list[str]:
    values = [
        value
        for name, value in environ.items()
        if _SECRET_ENV_NAME.search(name) and len(value) >= 8
    ]
    return sorted(values, key=len, reverse=True)


@lru_cache(maxsize=1)
def _bip39_words() -> frozenset[str]:
    """The BIP-39 English word list (shipped by the ``mnemonic`` package)."""
    text = resources.files("mnemonic").joinpath("wordlist", "english.txt").read_text("utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


def _iban_valid(compact: str) -> bool:
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    digits = "".join(str(int(char, 36)) for char in rearranged)
    return int(digits) % 97 == 1


def _redact_iban(match: re.Match[str]) -> str:
    text = match.group()
    # The longest prefix that is a valid IBAN wins (a trailing word may have been swallowed).
    for end in range(len(text), 14, -1):
        if end < len(text) and text[end] != " ":
            continue
        if _iban_valid(text[:end].replace(" ", "")):
            return REDACTED + text[end:]
    return text


def _redact_seed_phrase(match: re.Match[str]) -> str:
    words = _bip39_words()
    text = match.group()
    spans = [(found.start(), found.end(), found.group()) for found in _WORD.finditer(text)]
    pieces: list[str] = []
    cursor = 0
    index = 0
    while index < len(spans):
        end = index
        while end < len(spans) and spans[end][2] in words:
            end += 1
        if end - index >= SEED_PHRASE_WORDS:
            pieces.append(text[cursor : spans[index][0]] + REDACTED)
            cursor = spans[end - 1][1]
            index = end
        else:
            index = max(end, index + 1)
    pieces.append(text[cursor:])
    return "".join(pieces)


def _keep_label(match: re.Match[str]) -> str:
    return f"{match.group(1)}{match.group(2)}{REDACTED}"


def redact_patterns(text: str) -> str:
    """Replace secrets that have a recognisable shape (best effort, see the module doc)."""
    for pattern in _PATTERNS:
        text = pattern.sub(REDACTED, text)
    text = _HEADER.sub(_keep_label, text)
    text = _QUERY.sub(lambda match: f"{match.group(1)}{REDACTED}", text)
    text = _PHRASE.sub(lambda match: f"{match.group(1)}{REDACTED}", text)
    text = _ASSIGNMENT.sub(_keep_label, text)
    text = _PIN.sub(_keep_label, text)
    text = _OTP.sub(_keep_label, text)
    text = _IBAN.sub(_redact_iban, text)
    return _WORD_RUN.sub(_redact_seed_phrase, text)


def _usable(values: Iterable[str | None]) -> list[str]:
    return [value for value in values if value and len(value) >= MIN_SECRET_CHARS]


def replace_values(text: str, values: Iterable[str]) -> str:
    """``text`` with every occurrence of each value (longest first) replaced."""
    for value in sorted(_usable(values), key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def redact(
    text: str, *, environ: Mapping[str, str] | None = None, known: Iterable[str] = ()
) -> str:
    """Replace likely secrets in ``text`` with ``[REDACTED]``.

    Args:
        text: Text about to reach a trace, a log or a read-only view.
        environ: Environment to take secret values from (default: ``os.environ``).
        known: Secret values this caller knows (replaced exactly, whatever their shape).

    Returns:
        The text with every known value and every pattern match replaced.
    """
    values = [*known, *_secret_env_values(os.environ if environ is None else environ)]
    return redact_patterns(replace_values(text, values))


def redact_data(value: Any, *, environ: Mapping[str, str] | None = None) -> Any:
    """JSON data with :func:`redact` applied to every string (keys kept), at every depth."""
    if isinstance(value, str):
        return redact(value, environ=environ)
    if isinstance(value, dict):
        return {key: redact_data(item, environ=environ) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(item, environ=environ) for item in value]
    return value


class KnownSecrets:
    """Secret values known to one process, replaced exactly wherever they appear.

    The ledger keeps one (``ApprovalLedger.trace_secrets``): every trace event it writes passes
    through it, whoever wrote the event. Values only accumulate; adding is thread-safe.
    """

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        self._lock = threading.Lock()
        self._values: tuple[str, ...] = ()
        self.add(*values)

    def add(self, *values: str | None) -> None:
        """Remember ``values`` (``None``, empty and very short values are ignored)."""
        fresh = [value for value in _usable(values) if value not in self._values]
        if fresh:
            with self._lock:
                merged = set(self._values) | set(fresh)
                self._values = tuple(sorted(merged, key=len, reverse=True))

    @property
    def values(self) -> tuple[str, ...]:
        """The known values, longest first."""
        return self._values

    def __bool__(self) -> bool:
        return bool(self._values)

    def redact_text(self, text: str) -> str:
        """``text`` with every known value replaced (longest first, as `replace_values`)."""
        return replace_values(text, self._values)

    def redact_data(self, value: Any) -> Any:
        """JSON data with every known value replaced in its strings (keys included)."""
        if not self._values:
            return value
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            return {
                self.redact_text(str(key)): self.redact_data(item) for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.redact_data(item) for item in value]
        return value
