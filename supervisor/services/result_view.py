"""An offloaded result as pages of display lines: pretty-printed JSON or the raw text, searchable.

A result that parses as JSON (up to :data:`MAX_PRETTY_BYTES`) is shown pretty-printed, two
spaces per level, keys in their stored order; ``raw`` shows the text as stored. Raw text is
paged by :data:`PAGE_BYTES` (a minified document is one long line), pretty JSON by
:data:`PAGE_LINES`. Every line is display text: hidden characters (controls, bidi, invisible)
are escaped, inside JSON strings as JSON ``\\uXXXX`` escapes, so what is searched is what is
shown (search for ``\\u202e`` to find a bidi override).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from supervisor.services.rendering import dumps_visible, visible_escapes

PAGE_BYTES = 64 * 1024
PAGE_LINES = 2_000
MAX_PRETTY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Match:
    """Where a search found its text: a page and a line on it (both from 0)."""

    page: int
    line: int


class ResultView:
    """The pages of one result in one mode.

    Args:
        content: The result's bytes (UTF-8; bad bytes are shown as replacement characters).
        pretty: Pretty-print it when it is JSON (ignored when it is not).
    """

    def __init__(self, content: bytes, *, pretty: bool = True) -> None:
        self.is_json = False
        value: object = None
        if len(content) <= MAX_PRETTY_BYTES:
            try:
                value = json.loads(content)
                self.is_json = True
            except (ValueError, UnicodeDecodeError):
                pass
        self.pretty = pretty and self.is_json
        if self.pretty:
            lines = dumps_visible(value, indent=2).split("\n")
            self.pages = [lines[i : i + PAGE_LINES] for i in range(0, len(lines), PAGE_LINES)]
        else:
            chunks = [content[i : i + PAGE_BYTES] for i in range(0, len(content), PAGE_BYTES)]
            self.pages = [
                [visible_escapes(line) for line in chunk.decode("utf-8", "replace").split("\n")]
                for chunk in chunks or [b""]
            ]

    @property
    def mode(self) -> str:
        """``pretty JSON``, ``raw JSON`` or ``text``."""
        if self.pretty:
            return "pretty JSON"
        return "raw JSON" if self.is_json else "text"

    def search(self, needle: str) -> list[Match]:
        """Every line holding ``needle`` (case-insensitive), in order."""
        wanted = needle.casefold()
        if not wanted:
            return []
        return [
            Match(page, number)
            for page, lines in enumerate(self.pages)
            for number, line in enumerate(lines)
            if wanted in line.casefold()
        ]
