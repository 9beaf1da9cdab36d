"""The full argument set of a proposal: pretty, highlighted, wrapped, never truncated.

A Line API view: long lines wrap instead of being cut, and every visual row drawn is recorded.
Once all rows have been drawn the view posts :class:`ArgumentsRendered`, which the screen turns
into a rendered guard; approving before that is refused.
"""

from __future__ import annotations

import re
from typing import ClassVar

from rich.cells import cell_len, chop_cells
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from screens.messages import ArgumentsRendered
from supervisor.ledger.models import Proposal
from supervisor.services.rendering import render_arguments

_TOKEN = re.compile(
    r'(?P<key>"(?:[^"\\]|\\.)*"(?=\s*:))|(?P<string>"(?:[^"\\]|\\.)*")'
    r"|(?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|(?P<literal>true|false|null)"
)
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)")


def _wrap(line: str, width: int) -> list[str]:
    if width <= 0 or cell_len(line) <= width:
        return [line]
    return chop_cells(line, width)


class ArgumentsView(ScrollView, can_focus=True):
    """Scrollable, wrapped view of one proposal's canonical arguments."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "arguments--key",
        "arguments--string",
        "arguments--number",
        "arguments--literal",
        "arguments--escape",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.proposal: Proposal | None = None
        self.lines: list[str] = []
        self._rows: list[str] = []
        self._seen: set[int] = set()
        self._confirmed = False
        self._wrap_width = 0

    def show(self, proposal: Proposal | None) -> None:
        """Display ``proposal``'s arguments (``None`` clears the view)."""
        self.show_value(proposal.arguments if proposal else None, proposal)

    def show_value(self, value: object, proposal: Proposal | None = None) -> None:
        """Display any JSON value; only a proposal's arguments can confirm the guard."""
        self.proposal = proposal
        self.lines = render_arguments(value) if value is not None else []
        self._confirmed = False
        self._relayout(force=True)
        self.scroll_home(animate=False)

    @property
    def rows_seen(self) -> tuple[int, int]:
        """How many visual rows were drawn, of how many."""
        return len(self._seen), len(self._rows)

    def _relayout(self, force: bool = False) -> None:
        width = max(8, self.scrollable_content_region.width or self.size.width or 80)
        if not force and width == self._wrap_width:
            return
        self._wrap_width = width
        self._rows = [row for line in self.lines for row in _wrap(line, width)]
        self._seen = set()
        self.virtual_size = Size(0, len(self._rows))
        self.refresh()

    def on_resize(self) -> None:
        self._relayout()

    def _highlight(self, row: str) -> list[Segment]:
        base = self.rich_style
        segments: list[Segment] = []
        position = 0
        for match in _TOKEN.finditer(row):
            if match.start() > position:
                segments.append(Segment(row[position : match.start()], base))
            kind = match.lastgroup or "string"
            style = base + self.get_component_rich_style(f"arguments--{kind}")
            segments.extend(self._with_escapes(match.group(), style))
            position = match.end()
        if position < len(row):
            segments.extend(self._with_escapes(row[position:], base))
        return segments

    def _with_escapes(self, text: str, style: Style) -> list[Segment]:
        escape_style = style + self.get_component_rich_style("arguments--escape")
        segments: list[Segment] = []
        position = 0
        for match in _ESCAPE.finditer(text):
            if match.start() > position:
                segments.append(Segment(text[position : match.start()], style))
            segments.append(Segment(match.group(), escape_style))
            position = match.end()
        if position < len(text):
            segments.append(Segment(text[position:], style))
        return segments

    def render_line(self, y: int) -> Strip:
        index = y + self.scroll_offset.y
        width = self.scrollable_content_region.width
        if index >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        self._seen.add(index)
        if not self._confirmed and self.proposal and len(self._seen) >= len(self._rows):
            self._confirmed = True
            self.post_message(ArgumentsRendered(self.proposal, list(self.lines)))
        return Strip(self._highlight(self._rows[index])).adjust_cell_length(width, self.rich_style)
