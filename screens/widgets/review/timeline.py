"""The review timeline: a Line API list over the filtered rows, coloured by outcome."""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from screens.widgets.trace.trace_view import OUTCOME_CLASSES
from supervisor.services.review import ReviewRow


def row_text(row: ReviewRow) -> str:
    """One timeline line (already escaped by the review index)."""
    return (
        f"{row.at:%Y-%m-%d %H:%M:%S} {row.agent:<12.12} {row.thread:<8.8} {row.kind:<11.11} "
        f"{row.tool:<16.16} {row.status:<9.9} {row.reason:<10.10} {row.summary}"
    )


class ReviewTimeline(ScrollView, can_focus=True):
    """Virtual list of review rows; grows as the source is indexed."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "trace--success",
        "trace--empty",
        "trace--degraded",
        "trace--error",
        "trace--decision",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[ReviewRow] = []

    def set_rows(self, rows: list[ReviewRow]) -> None:
        """Show ``rows`` (a filtered selection) from the top."""
        self.rows = rows
        self.virtual_size = Size(0, len(rows))
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
        return Strip([Segment(row_text(row), style)]).adjust_cell_length(width, style)
