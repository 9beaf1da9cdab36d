"""How arguments are shown to a human: pretty JSON with invisible characters made visible.

A reviewer must see exactly what will run. ``json.dumps`` already escapes C0 controls; this
module also escapes DEL, C1 controls, bidi overrides and isolates, zero-width characters and
line/paragraph separators, so ``"pay\u202egnp.exe"`` is shown as ``pay\\u202egnp.exe`` rather
than being reordered on screen. A literal backslash is already ``\\\\`` in JSON, so an escape
shown by this module cannot be confused with text the agent wrote.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from supervisor.canonical import sha256_hex

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})


def _escape_char(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible_escapes(text: str) -> str:
    """``text`` with every control, format (bidi, zero-width) or unassigned character escaped."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(
        _escape_char(char) if unicodedata.category(char) in _INVISIBLE_CATEGORIES else char
        for char in text
    )


def render_arguments(arguments: Any) -> list[str]:
    """The lines a reviewer sees for ``arguments``: indented JSON, keys sorted, all visible."""
    pretty = json.dumps(arguments, indent=2, ensure_ascii=False, sort_keys=True)
    return [visible_escapes(line) for line in pretty.split("\n")]


def rendered_digest(lines: list[str]) -> str:
    """SHA-256 of rendered lines, used by the rendered guard."""
    return sha256_hex("\n".join(lines))


def short_hash(value: str, length: int = 12) -> str:
    """The first ``length`` characters of a hex digest (``sha256:`` prefixes are dropped)."""
    return value.removeprefix("sha256:")[:length]
