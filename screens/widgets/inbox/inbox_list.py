"""The inbox rows as a virtual list (Line API): only the rows on screen are ever drawn.

A header line stays on top; below it one line per pending proposal, zebra-striped, with a row
cursor. Drawing costs the same for ten rows or ten thousand, so the inbox can grow page by page
while the first page is already on screen.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

#: Columns: name, the narrowest width worth showing and the width wanted (in cells). The id,
#: risk and expiry never shrink; the others give way on a narrow terminal and grow, up to twice
#: what they want, on a wide one (longer values are clipped; the detail pane shows them whole).
COLUMNS: tuple[tuple[str, int, int], ...] = (
    ("id", 8, 8),
    ("tool", 12, 22),
    ("agent", 8, 16),
    ("thread", 6, 12),
    ("domain", 6, 12),
    ("risk", 6, 6),
    ("expires", 9, 9),
)
#: The columns while calls of another runtime than our own agents' are pending: the runtime
#: (claude-code, mcp:SERVER, acp:AGENT) after the agent. Our own agents alone keep the above.
WITH_RUNTIME: tuple[tuple[str, int, int], ...] = (*COLUMNS[:3], ("runtime", 11, 14), *COLUMNS[3:])
#: How many cells of a proposal id the inbox shows (a prefix the CLI accepts).
ID_WIDTH = COLUMNS[0][1]

Columns = tuple[tuple[str, int, int], ...]

Cells = tuple[str, ...]


@functools.lru_cache(maxsize=64)
def fit_widths(width: int, columns: Columns = COLUMNS) -> tuple[int, ...]:
    """Column widths for a row of ``width`` cells (a leading space, one space between columns).

    Below the wanted total, the shrinking columns lose width in proportion to what they can
    spare, never below their minimum; above it, they share the extra up to twice what they
    want. The fixed columns keep their width either way, so an id or a countdown is never cut.
    """
    available = width - 1 - (len(columns) - 1)
    minimum = [low for _, low, _ in columns]
    wanted = [want for _, _, want in columns]
    if available >= sum(wanted):
        widths = list(wanted)
        extra = available - sum(wanted)
        room = [want for low, want in zip(minimum, wanted, strict=True) if low < want]
        if room:
            share = min(1.0, extra / sum(room))
            for index, (low, want) in enumerate(zip(minimum, wanted, strict=True)):
                if low < want:
                    widths[index] += int(want * share)
        return tuple(widths)
    spare = sum(wanted) - sum(minimum)
    give = max(0, available - sum(minimum))
    return tuple(
        low + (give * (want - low)) // spare if spare else low
        for low, want in zip(minimum, wanted, strict=True)
    )


def layout_line(cells: Sequence[str], widths: Sequence[int]) -> str:
    """Cells padded and clipped to ``widths``, one space apart."""
    return " ".join(f"{cell:<{width}.{width}}" for cell, width in zip(cells, widths, strict=True))


def header_line(widths: Sequence[int], columns: Columns = COLUMNS) -> str:
    """The column names laid out like the rows."""
    return " " + layout_line([name for name, _, _ in columns], widths)


class InboxList(ScrollView, can_focus=True):
    """Rows of the inbox; ``cells_of(row_id)`` supplies the text of one row when it is drawn."""

    DEFAULT_CSS = """
    InboxList {
        background: $surface;
        & > .inbox-list--header { text-style: bold; background: $panel; color: $foreground; }
        & > .inbox-list--even-row { background: $surface-lighten-1 50%; }
        & > .inbox-list--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
        }
        &:focus > .inbox-list--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "inbox-list--header",
        "inbox-list--even-row",
        "inbox-list--cursor",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "Up", show=False, id="inbox.up"),
        Binding("down", "move(1)", "Down", show=False, id="inbox.down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="inbox.page-up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="inbox.page-down"),
        Binding("home", "move_to(0)", "First", show=False, id="inbox.first"),
        Binding("end", "move_to(-1)", "Last", show=False, id="inbox.last"),
    ]

    @dataclass
    class CursorMoved(Message):
        """The cursor moved to another row (or the row under it changed), or the operator
        pointed at a row (a key or a click, even on the row already under the cursor)."""

        #: A key or click of the operator's, not the rows changing under the cursor.
        by_operator: bool = False

    def __init__(self, cells_of: Callable[[str], Cells], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cells_of = cells_of
        self.columns: Columns = COLUMNS
        self.row_ids: list[str] = []
        self.cursor_row = 0
        self._strips: LRUCache[tuple[str, Cells, int, bool, bool, bool], Strip] = LRUCache(512)

    @property
    def row_count(self) -> int:
        """Rows in the list (the header excluded)."""
        return len(self.row_ids)

    @property
    def cursor_id(self) -> str | None:
        """The id of the row under the cursor."""
        return self.row_ids[self.cursor_row] if self.row_ids else None

    def set_columns(self, columns: Columns) -> None:
        """Lay the rows out in ``columns`` (``cells_of`` gives one cell per column)."""
        if columns != self.columns:
            self.columns = columns
            self._strips.clear()
            self.refresh()

    def set_rows(self, row_ids: list[str]) -> None:
        """Show ``row_ids`` in order, keeping the cursor on the same row when it is still there."""
        before = self.cursor_id
        self.row_ids = row_ids
        if before is not None and before in row_ids:
            if self.cursor_row >= len(row_ids) or row_ids[self.cursor_row] != before:
                self.cursor_row = row_ids.index(before)
        self.cursor_row = max(0, min(self.cursor_row, len(row_ids) - 1))
        self.virtual_size = Size(0, len(row_ids) + 1)
        self.refresh()
        if self.cursor_id != before:
            self.post_message(self.CursorMoved())

    # -- cursor ---------------------------------------------------------------------------

    @property
    def _page_height(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def move_cursor(self, row: int, *, by_operator: bool = False) -> None:
        """Put the cursor on ``row`` (clamped) and scroll it into view.

        Args:
            row: The row to put the cursor on.
            by_operator: A key or click asked for it: said even when the cursor stays put
                (the screen shows that row again if the detail pane shows something else).
        """
        if not self.row_ids:
            return
        row = max(0, min(row, len(self.row_ids) - 1))
        moved = row != self.cursor_row
        self.cursor_row = row
        top = int(self.scroll_offset.y)
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif row >= top + self._page_height:
            self.scroll_to(y=row - self._page_height + 1, animate=False, immediate=True)
        self.refresh()
        if moved or by_operator:
            self.post_message(self.CursorMoved(by_operator))

    def action_move(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta, by_operator=True)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self.cursor_row + direction * self._page_height, by_operator=True)

    def action_move_to(self, row: int) -> None:
        self.move_cursor(row if row >= 0 else len(self.row_ids) - 1, by_operator=True)

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            self.move_cursor(int(self.scroll_offset.y) + event.y - 1, by_operator=True)

    # -- drawing --------------------------------------------------------------------------

    def visible_rows(self) -> list[str]:
        """Ids of the rows on screen, top to bottom."""
        top = int(self.scroll_offset.y)
        return self.row_ids[top : top + self._page_height]

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            header = self.rich_style + self.get_component_rich_style("inbox-list--header")
            line = header_line(fit_widths(width, self.columns), self.columns)
            return Strip([Segment(line, header)]).adjust_cell_length(width, header)
        index = int(self.scroll_offset.y) + y - 1
        if index >= len(self.row_ids):
            return Strip.blank(width, self.rich_style)
        row_id = self.row_ids[index]
        cells = self.cells_of(row_id)
        cursor = index == self.cursor_row
        key = (row_id, cells, width, index % 2 == 1, cursor, self.has_focus)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        style: Style = self.rich_style
        if index % 2 == 1:
            style = style + self.get_component_rich_style("inbox-list--even-row")
        if cursor:
            style = style + self.get_component_rich_style("inbox-list--cursor")
        line = " " + layout_line(cells, fit_widths(width, self.columns))
        strip = Strip([Segment(line, style)]).adjust_cell_length(width, style)
        self._strips[key] = strip
        return strip

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def notify_style_update(self) -> None:
        self._strips.clear()
        super().notify_style_update()
