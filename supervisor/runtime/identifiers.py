"""Identifiers pulled from a tool result, so a pointer to an offloaded result stays useful.

Extraction is deterministic and bounded (the rules are documented in ``docs/results.md``):

* JSON text is parsed and walked in document order (object members in their written order,
  array items in order, depth first). Text that is not JSON is scanned as plain text.
* The value of an *identifier key* is taken whole when it is a string or an integer (never a
  boolean, float, null or container). A key is normalised first (camelCase split, ``-`` and
  spaces to ``_``, lower case); it is an identifier key when it equals one of
  :data:`IDENTIFIER_KEYS` or ends in ``_id`` or ``_key``.
* Every other string, and every object key, is scanned for http(s) URLs, UUIDs and e-mail
  addresses, in the order they appear in the string.
* Candidates are stripped of surrounding whitespace; empty ones and ones longer than
  ``max_chars`` are skipped (a truncated identifier would be wrong, not shorter). Duplicates
  are dropped (exact text), first-seen order is kept, and the walk stops at ``limit``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

IDENTIFIER_KEYS: frozenset[str] = frozenset({"id", "uuid", "key", "sku", "url", "href", "email"})
"""Normalised key names whose scalar values are identifiers."""

IDENTIFIER_KEY_SUFFIXES: tuple[str, ...] = ("_id", "_key")
"""Normalised key suffixes whose scalar values are identifiers."""

DEFAULT_MAX_IDENTIFIER_CHARS = 200
"""Identifiers longer than this are skipped."""

_PATTERN = re.compile(
    r"(?P<url>https?://[^\s\"'<>\\`]+)"
    r"|(?P<uuid>\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b)"
    r"|(?P<email>\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b)"
)
_URL_TRAILING = ".,;:!?)]}'"
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[\s\-]+")


def normalise_key(key: str) -> str:
    """A key in snake case: ``userId`` -> ``user_id``, ``Order-Key`` -> ``order_key``."""
    return _SEPARATORS.sub("_", _CAMEL_BOUNDARY.sub("_", key.strip())).lower()


def is_identifier_key(key: str) -> bool:
    """Whether values under ``key`` are identifiers (see the module rules)."""
    normalised = normalise_key(key)
    return normalised in IDENTIFIER_KEYS or normalised.endswith(IDENTIFIER_KEY_SUFFIXES)


def scan_text(text: str) -> Iterator[str]:
    """URLs, UUIDs and e-mail addresses in ``text``, in the order they appear.

    Args:
        text: Any string.

    Returns:
        An iterator of the matches (URLs without trailing punctuation).
    """
    for match in _PATTERN.finditer(text):
        found = match.group(0)
        if match.lastgroup == "url":
            found = found.rstrip(_URL_TRAILING)
            if found.endswith("://") or "://" not in found:
                continue
        yield found


def extract_identifiers(
    content: str, *, limit: int, max_chars: int = DEFAULT_MAX_IDENTIFIER_CHARS
) -> list[str]:
    """Identifiers in a tool result's JSON text, deduplicated, in first-seen order.

    Args:
        content: The result as JSON text (plain text is scanned as text).
        limit: At most this many identifiers are returned (0 returns none).
        max_chars: Candidates longer than this are skipped.

    Returns:
        The identifiers.
    """
    if limit <= 0:
        return []
    try:
        parsed: Any = json.loads(content)
    except (ValueError, RecursionError):
        return _collect(scan_text(content), limit, max_chars)
    return _collect(_walk(parsed), limit, max_chars)


def extract_from_value(
    value: Any, *, limit: int, max_chars: int = DEFAULT_MAX_IDENTIFIER_CHARS
) -> list[str]:
    """Like :func:`extract_identifiers`, for already-parsed JSON data.

    Args:
        value: JSON data (dicts, lists, strings, numbers, booleans, None).
        limit: At most this many identifiers are returned.
        max_chars: Candidates longer than this are skipped.

    Returns:
        The identifiers.
    """
    if limit <= 0:
        return []
    return _collect(_walk(value), limit, max_chars)


def _collect(candidates: Iterator[str], limit: int, max_chars: int) -> list[str]:
    seen: set[str] = set()
    found: list[str] = []
    for candidate in candidates:
        text = candidate.strip()
        if not text or len(text) > max_chars or text in seen:
            continue
        seen.add(text)
        found.append(text)
        if len(found) >= limit:
            break
    return found


def _walk(root: Any) -> Iterator[str]:
    """Depth-first, document-order walk with an explicit stack (deep JSON cannot overflow)."""
    stack: list[Iterator[tuple[str | None, Any]]] = [iter(((None, root),))]
    while stack:
        try:
            key, item = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        if key is not None:
            key_text = str(key)
            yield from scan_text(key_text)
            if is_identifier_key(key_text) and _is_scalar_identifier(item):
                yield str(item)
                continue
        if isinstance(item, dict):
            stack.append(iter(item.items()))
        elif isinstance(item, list):
            stack.append((None, element) for element in item)
        elif isinstance(item, str):
            yield from scan_text(item)


def _is_scalar_identifier(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
