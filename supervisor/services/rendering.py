"""How untrusted text is shown to a human: every invisible or deceptive character made visible.

A reviewer must see exactly what will run, and text from the ledger (arguments, agent, approver
and tool names) must not be able to drive the terminal. :func:`visible_escapes` escapes, as
``\\uXXXX`` (``\\UXXXXXXXX`` above the BMP):

* control characters (C0 with tab and newline, DEL, C1: ESC and CSI/OSC sequences cannot start),
  format characters (bidi overrides and isolates, zero-width characters, tags), line and
  paragraph separators, private-use, surrogate and unassigned code points;
* every space other than U+0020 (NBSP, the U+2000 spaces, ideographic space, ...);
* enclosing marks and overlay marks (combining class 1, e.g. U+0338), which draw over the
  character before them;
* characters that are letters or marks on paper but render as nothing: the rest of Unicode's
  Default_Ignorable_Code_Point set (Hangul fillers such as U+3164, variation selectors, the
  combining grapheme joiner, ...) and blank symbols (U+2800 braille blank, ...).

Ordinary letters, digits and combining marks of every script (Devanagari vowel signs and
virama, Vietnamese tone marks, Hebrew points) are left alone. :func:`visible_json` applies the
same escapes to serialised JSON, as JSON ``\\uXXXX`` escapes, so the document still parses to
the same value. A literal backslash is already ``\\\\`` in JSON, so an escape shown by
:func:`render_arguments` cannot be confused with text the agent wrote.
"""

from __future__ import annotations

import bisect
import json
import unicodedata
from functools import lru_cache
from typing import Any

from supervisor.canonical import sha256_hex
from supervisor.outcomes.blobref import POINTER_PREFIX

#: Printable code points that must still be escaped, as sorted inclusive ranges (Unicode 14):
#: enclosing marks (Me), overlay marks (Mn, canonical combining class 1), the printable members
#: of Default_Ignorable_Code_Point, and blank-looking symbols and letters.
_HIDDEN_PRINTABLE: tuple[tuple[int, int], ...] = (
    (0x0334, 0x0338),  # combining overlays: tilde, strokes, solidus
    (0x034F, 0x034F),  # COMBINING GRAPHEME JOINER (default ignorable)
    (0x0488, 0x0489),  # Cyrillic enclosing marks
    (0x115F, 0x1160),  # HANGUL CHOSEONG / JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # KHMER VOWEL INHERENT AQ / AA (default ignorable)
    (0x180B, 0x180D),  # MONGOLIAN FREE VARIATION SELECTORS
    (0x180F, 0x180F),  # MONGOLIAN FREE VARIATION SELECTOR FOUR
    (0x1ABE, 0x1ABE),  # COMBINING PARENTHESES OVERLAY
    (0x1CD4, 0x1CD4),  # Vedic overlay marks
    (0x1CE2, 0x1CE8),
    (0x20D2, 0x20D3),  # combining overlays (long/short vertical line)
    (0x20D8, 0x20DA),  # combining ring/clockwise ring overlays
    (0x20DD, 0x20E0),  # combining enclosing circle, square, diamond, circle backslash
    (0x20E2, 0x20E6),  # enclosing screen, keycap, triangle; double vertical stroke overlays
    (0x20EA, 0x20EB),  # leftwards arrow overlay, long double solidus overlay
    (0x2800, 0x2800),  # BRAILLE PATTERN BLANK
    (0x3164, 0x3164),  # HANGUL FILLER
    (0xA670, 0xA672),  # combining Cyrillic enclosing signs
    (0xFE00, 0xFE0F),  # VARIATION SELECTOR-1..16
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER
    (0x10A39, 0x10A39),  # KHAROSHTHI SIGN CAUDA (overlay)
    (0x16AF0, 0x16AF4),  # Bassa Vah combining marks (overlay)
    (0x16FE4, 0x16FE4),  # KHITAN SMALL SCRIPT FILLER
    (0x1BC9E, 0x1BC9E),  # DUPLOYAN DOUBLE MARK (overlay)
    (0x1D159, 0x1D159),  # MUSICAL SYMBOL NULL NOTEHEAD
    (0x1D167, 0x1D169),  # musical tremolo overlays
    (0xE0100, 0xE01EF),  # VARIATION SELECTOR-17..256
)
_RANGE_STARTS = [start for start, _ in _HIDDEN_PRINTABLE]


@lru_cache(maxsize=8192)
def is_hidden(char: str) -> bool:
    """Whether ``char`` is escaped when shown (see the module docstring for the classes)."""
    if not char.isprintable():  # Cc, Cf, Cs, Co, Cn, Zl, Zp and every Zs but U+0020
        return True
    code = ord(char)
    index = bisect.bisect_right(_RANGE_STARTS, code) - 1
    if index >= 0 and code <= _HIDDEN_PRINTABLE[index][1]:
        return True
    category = unicodedata.category(char)
    # Marks added after the table's Unicode version are still caught by their properties.
    return category == "Me" or (category == "Mn" and unicodedata.combining(char) == 1)


def _escape_char(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible_escapes(text: str) -> str:
    """``text`` with every control, format, space, overlay or blank character escaped."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape_char(char) if is_hidden(char) else char for char in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON spells a code point above the BMP as a UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


#: Whitespace that may appear between JSON tokens; inside strings JSON always escapes it.
_JSON_WHITESPACE = frozenset("\t\n\r")


def visible_json(document: str) -> str:
    """Serialised JSON with the characters :func:`visible_escapes` escapes as ``\\uXXXX``.

    Such characters can only occur inside JSON strings (outside them JSON allows only ASCII
    whitespace and punctuation), where a ``\\uXXXX`` escape means the same character, so the
    result parses to exactly the same value.
    """
    if document.isascii() and "\x7f" not in document:
        return document  # a serialiser has already escaped every ASCII control in strings
    return "".join(
        _json_escape(char) if char not in _JSON_WHITESPACE and is_hidden(char) else char
        for char in document
    )


def dumps_visible(value: Any, *, indent: int | None = None, sort_keys: bool = False) -> str:
    """``json.dumps(value)`` with readable non-ASCII text and :func:`visible_json` escapes."""
    return visible_json(json.dumps(value, indent=indent, sort_keys=sort_keys, ensure_ascii=False))


def render_arguments(arguments: Any) -> list[str]:
    """The lines a reviewer sees for ``arguments``: indented JSON, keys sorted, all visible."""
    pretty = json.dumps(arguments, indent=2, ensure_ascii=False, sort_keys=True)
    return [visible_escapes(line) for line in pretty.split("\n")]


def rendered_digest(lines: list[str]) -> str:
    """SHA-256 of rendered lines, used by the rendered guard."""
    return sha256_hex("\n".join(lines))


def short_hash(value: str, length: int = 12) -> str:
    """The first ``length`` characters of a hex digest (a blob pointer's ``sha256:`` prefix is
    dropped); any other text is cut the same way, never refused, since it is only shown."""
    return value.removeprefix(POINTER_PREFIX)[:length]
