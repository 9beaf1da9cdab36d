"""Redaction of secrets from text bound for traces and logs.

Exception text raised inside a tool can hold credentials (a connection string, a bearer token).
The model never sees it; the trace keeps it only after this pass.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

REDACTED = "[REDACTED]"

_PATTERNS = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]+=*"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
)
_ASSIGNMENT = re.compile(
    r"(?i)\b([\w.-]*(?:api[_-]?key|token|secret|password|passwd|pwd|authorization|credential)"
    r"[\w.-]*)(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
)
_SECRET_ENV_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)")


def _secret_env_values(environ: Mapping[str, str]) -> list[str]:
    values = [
        value
        for name, value in environ.items()
        if _SECRET_ENV_NAME.search(name) and len(value) >= 8
    ]
    return sorted(values, key=len, reverse=True)


def redact(text: str, *, environ: Mapping[str, str] | None = None) -> str:
    """Replace likely secrets in ``text`` with ``[REDACTED]``.

    Covers API keys and bearer tokens by shape, ``name=value`` assignments whose name says
    key/token/secret/password, passwords in URLs, and the literal values of environment variables
    whose names say KEY, TOKEN, SECRET or PASSWORD.

    Args:
        text: Text about to reach a trace or a log.
        environ: Environment to take secret values from (default: ``os.environ``).

    Returns:
        The text with every match replaced.
    """
    for value in _secret_env_values(os.environ if environ is None else environ):
        text = text.replace(value, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(REDACTED, text)
    return _ASSIGNMENT.sub(lambda match: f"{match.group(1)}{match.group(2)}{REDACTED}", text)
