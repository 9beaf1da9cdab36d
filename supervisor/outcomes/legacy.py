"""Outcome inference for tools that return plain values, read from structure and never prose.

Legacy tools do not wrap their values in a :class:`ToolResult`, so the SDK reads the few
structural conventions such tools already use. Booleans must be real ``bool`` objects (``0``,
``"false"`` and ``None`` never count as False), codes must be strings, collections must be
``list`` or ``tuple``. Text is never interpreted: a message saying "error" is still a success.

========================================================  ===================================
Value                                                     Outcome
========================================================  ===================================
mapping with ``ok`` or ``success`` exactly ``False``      ``error``; reason_code from a string
                                                          ``error_code``, else ``error.code``,
                                                          else ``code``
mapping with a non-empty string ``error_code``, or        ``error`` with that reason code,
``error`` a mapping with a non-empty string ``code``      even if ``ok`` is absent or True
either failure above whose reason code names a provider   ``provider_error``
failure (``provider_*``, ``upstream_*`` or one of
:data:`PROVIDER_FAILURE_CODES`, case-insensitive)
mapping with ``fallback_used`` exactly ``True``           ``fallback``; provider names from
                                                          string ``primary_provider`` and
                                                          ``fallback_provider`` keys
mapping with ``degraded`` exactly ``True``                ``degraded`` (``fallback`` with
                                                          ``degraded=True`` if also a fallback)
mapping whose ``results``, ``items`` or ``matches``       result_count = its length; ``empty``
(first that is a list, in that order) is a list           when it has none and no flag applies
bare list or tuple                                        ``empty`` if it has no items, else
                                                          ``success``; result_count = length
anything else (strings, numbers, None, other mappings)    ``success``
========================================================  ===================================

Precedence: failures beat everything, and a failure carries no result_count. Flags beat
emptiness: an empty collection with ``fallback_used`` is ``fallback`` with ``result_count=0``
(an alternate path that completed and found nothing), and with ``degraded`` it is ``degraded``
with ``result_count=0``, so the quality signal is never lost behind ``empty``.

Reason codes and provider names that are not identifier-shaped (for example a sentence in
``error_code``) are dropped rather than copied, because outcome evidence is content-free; the
failure itself is still detected from the key's presence. Inference never raises and never
mutates the value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from supervisor.outcomes.model import (
    PROVIDER_NAME_PATTERN,
    REASON_CODE_PATTERN,
    ToolOutcome,
    ToolOutcomeStatus,
    ToolResult,
)

PROVIDER_FAILURE_CODES: frozenset[str] = frozenset(
    {
        "rate_limited",
        "quota_exceeded",
        "service_unavailable",
        "upstream_timeout",
        "provider_unavailable",
    }
)
"""Reason codes meaning a provider failed, besides any starting ``provider_`` or ``upstream_``."""

PROVIDER_FAILURE_PREFIXES: tuple[str, ...] = ("provider_", "upstream_")
"""Reason-code prefixes that mean a provider failed."""

COLLECTION_KEYS: tuple[str, ...] = ("results", "items", "matches")
"""Keys whose list value counts the records a read returned, checked in this order."""

STRUCTURAL_KEYS = frozenset(
    {"ok", "success", "error_code", "error", "fallback_used", "degraded", *COLLECTION_KEYS}
)
"""Every key the table reads; a mapping with none of them is a plain success."""

_PLAIN_SUCCESS = ToolOutcome()
"""Shared by every plain success: outcomes are frozen, so one instance serves all."""

_REASON_CODE = re.compile(REASON_CODE_PATTERN)
_PROVIDER_NAME = re.compile(PROVIDER_NAME_PATTERN)


def infer_outcome(value: Any) -> ToolOutcome:
    """Infer how a call went from the structure of a plain return value.

    Args:
        value: What the tool returned. A ToolResult yields its own outcome, though
            :func:`resolve_outcome` is the call that also unwraps the value.

    Returns:
        The inferred outcome; ``success`` whenever the structure says nothing else. The table in
        this module's docstring is the complete rule set.
    """
    if isinstance(value, ToolResult):
        return resolve_outcome(value)[1]
    if isinstance(value, list | tuple):
        return ToolOutcome(
            status=ToolOutcomeStatus.EMPTY if not value else ToolOutcomeStatus.SUCCESS,
            result_count=len(value),
        )
    if not isinstance(value, Mapping) or STRUCTURAL_KEYS.isdisjoint(value.keys()):
        return _PLAIN_SUCCESS
    failure = _infer_failure(value)
    if failure is not None:
        return failure
    result_count = _result_count(value)
    if value.get("fallback_used") is True:
        primary = _provider_name(value.get("primary_provider"))
        fallback = _provider_name(value.get("fallback_provider"))
        return ToolOutcome(
            status=ToolOutcomeStatus.FALLBACK,
            primary_provider=primary if primary != fallback else None,
            fallback_provider=fallback,
            degraded=value.get("degraded") is True,
            result_count=result_count,
        )
    if value.get("degraded") is True:
        return ToolOutcome(status=ToolOutcomeStatus.DEGRADED, result_count=result_count)
    if result_count == 0:
        return ToolOutcome(status=ToolOutcomeStatus.EMPTY, result_count=0)
    return ToolOutcome(result_count=result_count)


def resolve_outcome(returned: Any) -> tuple[Any, ToolOutcome]:
    """Split what a tool returned into the value the model sees and the outcome evidence.

    Args:
        returned: The tool's return value, a :class:`ToolResult` or a plain value.

    Returns:
        ``(value, outcome)``: a ToolResult's value with its outcome (inferred from the value
        when the outcome is None), or a plain value unchanged with its inferred outcome.
    """
    if isinstance(returned, ToolResult):
        value: Any = returned.value
        return value, returned.outcome if returned.outcome is not None else infer_outcome(value)
    return returned, infer_outcome(returned)


def is_provider_failure(reason_code: str | None) -> bool:
    """Whether a reason code says a provider (rather than the tool itself) failed.

    Args:
        reason_code: A structured code such as ``"rate_limited"``; compared case-insensitively.

    Returns:
        True for codes starting ``provider_`` or ``upstream_`` and for
        :data:`PROVIDER_FAILURE_CODES`.
    """
    if not reason_code:
        return False
    code = reason_code.lower()
    return code.startswith(PROVIDER_FAILURE_PREFIXES) or code in PROVIDER_FAILURE_CODES


def _infer_failure(value: Mapping[Any, Any]) -> ToolOutcome | None:
    """The error outcome a mapping's structure states, or None when it states no failure."""
    error_code = _nonempty_str(value.get("error_code"))
    error = value.get("error")
    nested_code = _nonempty_str(error.get("code")) if isinstance(error, Mapping) else None
    flagged = value.get("ok") is False or value.get("success") is False
    if not (flagged or error_code or nested_code):
        return None
    raw_code = error_code or nested_code or (_nonempty_str(value.get("code")) if flagged else None)
    reason_code = raw_code if raw_code and _REASON_CODE.fullmatch(raw_code) else None
    status = (
        ToolOutcomeStatus.PROVIDER_ERROR
        if is_provider_failure(reason_code)
        else ToolOutcomeStatus.ERROR
    )
    return ToolOutcome(status=status, reason_code=reason_code)


def _result_count(value: Mapping[Any, Any]) -> int | None:
    """Length of the first ``results``/``items``/``matches`` list, or None if there is none."""
    for key in COLLECTION_KEYS:
        collection = value.get(key)
        if isinstance(collection, list | tuple):
            return len(collection)
    return None


def _nonempty_str(candidate: Any) -> str | None:
    return candidate if isinstance(candidate, str) and candidate else None


def _provider_name(candidate: Any) -> str | None:
    """A provider name worth recording as evidence: an identifier-shaped string."""
    name = _nonempty_str(candidate)
    return name if name and _PROVIDER_NAME.fullmatch(name) else None
