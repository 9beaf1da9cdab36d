"""The review timeline: a Line API list over the filtered rows, coloured by outcome.

The rows are any sequence; the review screen passes a view that pages them out of its index.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.segment import Segment
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from screens.literal import escaped
from screens.widgets.trace.trace_view import OUTCOME_CLASSES
from supervisor.services.review.rows import ReviewRow


def row_text(row: ReviewRow, summary: str | None = None) -> str:
    """One timeline line; names from the trace are escaped here (the summary already is)."""
    return (
        f"{row.at:%Y-%m-%d %H:%M:%S} {escaped(row.agent):<12.12} {escaped(row.thread):<8.8} "
        f"{escaped(row.kind):<11.11} {escaped(row.tool):<16.16} {escaped(row.status):<9.9} "
        f"{escaped(row.reason):<10.10} {escaped(row.summary if summary is None else summary)}"
    )


def _own_summary(row: ReviewRow) -> str:
    return row.summary


class ReviewTimeline(ScrollView, can_focus=True):
    """Virtual list of review rows with a cursor; grows as the source is indexed."""

    DEFAULT_CSS = """
    ReviewTimeline > .review--cursor {
        text-style: reverse;
    }
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "trace--success",
        "trace--empty",
        "trace--degraded",
        "trace--error",
        "trace--decision",
        "review--cursor",
    }

    def __init__(
        self, *, summary_of: Callable[[ReviewRow], str] = _own_summary, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.rows: Sequence[ReviewRow] = []
        self.summary_of = summary_of
        self.cursor: int | None = None

    def set_rows(self, rows: Sequence[ReviewRow], *, keep_cursor: bool = False) -> None:
        """Show ``rows`` (a filtered selection); the cursor is dropped unless ``keep_cursor``."""
        self.rows = rows
        if not keep_cursor:
            self.cursor = None
        self.virtual_size = Size(0, len(rows))
        self.refresh()

    def move_cursor(self, index: int) -> None:
        """Put the cursor on row ``index`` and scroll it into view."""
        self.cursor = index
        self.scroll_to_region(Region(0, index, 1, 1), animate=False)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        index = y + self.scroll_offset.y
        width = self.scrollable_content_region.width
        if index >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        row = self.rows[index]
        style = self.rich_style
        component = OUTCOME_CLASSES.get(row.status)
        if component:
            style = style + self.get_component_rich_style(component)
        if index == self.cursor:
            style = style + self.get_component_rich_style("review--cursor")
        text = row_text(row, self.summary_of(row))
        return Strip([Segment(text, style)]).adjust_cell_length(width, style)
