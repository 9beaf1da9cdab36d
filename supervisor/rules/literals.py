"""Writing JSON values as CEL and TOML literals, for the rules ``policy suggest`` writes.

Values come from the ledger (arguments a model chose), so both writers escape every character
that is not printable (controls, format characters such as bidi overrides, separators other
than the space) as a ``\\u`` / ``\\U`` escape: the file is valid, and shows what it means.
"""

from __future__ import annotations

import re
from typing import Any

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Words CEL reserves: an argument with such a name is read as ``args["in"]``.
_CEL_RESERVED = frozenset(
    "as break const continue else false for function if import in let loop package namespace "
    "null return true var void while".split()
)
_TOML_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_INT64 = (-(2**63), 2**63 - 1)


def _escaped(text: str) -> str:
    """A double-quoted string valid in both CEL and TOML (their escapes agree on these)."""
    out = ['"']
    for char in text:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char.isprintable():
            out.append(char)
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(f"\\U{ord(char):08X}")
    out.append('"')
    return "".join(out)


def _number(value: int | float) -> str:
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise ValueError("an integer outside int64 has no CEL literal")
        return str(value)
    text = repr(value)
    return text if any(mark in text for mark in ".e") else f"{text}.0"


def cel_literal(value: Any) -> str:
    """``value`` (JSON data) as a CEL literal.

    Raises:
        ValueError: An integer outside int64, or a value that is not JSON data.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number(value)
    if isinstance(value, str):
        return _escaped(value)
    if isinstance(value, list):
        return "[" + ", ".join(cel_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{_escaped(str(key))}: {cel_literal(item)}" for key, item in value.items())
        return "{" + ", ".join(pairs) + "}"
    raise ValueError(f"not JSON data: {type(value).__name__}")


def cel_field(variable: str, key: str) -> str:
    """``args.key``, or ``args["key"]`` when the key is not a plain CEL identifier."""
    if _IDENTIFIER.fullmatch(key) and key not in _CEL_RESERVED:
        return f"{variable}.{key}"
    return f"{variable}[{_escaped(key)}]"


def toml_key(key: str) -> str:
    return key if _TOML_BARE_KEY.fullmatch(key) else _escaped(key)


def toml_value(value: Any) -> str:
    """``value`` (JSON data without nulls) as a TOML value; inline tables for objects.

    Raises:
        ValueError: A ``null`` (TOML has none) or a value that is not JSON data.
    """
    if value is None:
        raise ValueError("TOML has no null")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value) if isinstance(value, int) else _number(value)
    if isinstance(value, str):
        return _escaped(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        pairs = (f"{toml_key(str(key))} = {toml_value(item)}" for key, item in value.items())
        return "{ " + ", ".join(pairs) + " }"
    raise ValueError(f"not JSON data: {type(value).__name__}")


def toml_string(text: str) -> str:
    """A TOML literal string (``'...'``, backslashes kept) when ``text`` is printable ASCII
    without a quote, else a basic string: CEL conditions stay readable, and any escape a
    display adds to the rest lands inside a basic string, where it means the same text."""
    if "'" not in text and text.isascii() and text.isprintable():
        return f"'{text}'"
    return _escaped(text)


def comment(text: str) -> str:
    """``text`` as one TOML comment line (newlines and hidden characters escaped)."""
    return "# " + _escaped(text)[1:-1].replace('\\"', '"').replace("\\\\", "\\")


def has_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, list):
        return any(has_null(item) for item in value)
    if isinstance(value, dict):
        return any(has_null(item) for item in value.values())
    return False
