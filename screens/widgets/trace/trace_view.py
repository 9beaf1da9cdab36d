"""The live tool trace: a Line API list of the service's bounded buffer, coloured by outcome.

It opens on the tail and follows it while :attr:`TraceView.following` holds: moving the cursor
or scrolling up stops following, so a reader is never yanked away; End (or scrolling back to
the bottom) follows again. A filter (:class:`~supervisor.services.traces.TraceFilter`) shows
one agent's events. A cursor row selects an event for the detail pane.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from supervisor.ledger.models import TraceEvent
from supervisor.services.rendering import visible_escapes
from supervisor.services.traces import ALL_EVENTS, TraceFilter, filter_events

OUTCOME_CLASSES = {
    "success": "trace--success",
    "empty": "trace--empty",
    "degraded": "trace--degraded",
    "fallback": "trace--degraded",
    "provider_error": "trace--error",
    "error": "trace--error",
    "denied": "trace--decision",
    "expired": "trace--decision",
    "cancelled": "trace--decision",
    "superseded": "trace--decision",
    "timeout": "trace--decision",
    "needs_reconciliation": "trace--error",
}


def _event_text(event: TraceEvent) -> str:
    moment = event.at.strftime("%H:%M:%S")
    status = event.outcome_status or ""
    blob = " [blob]" if event.blob_ref else ""
    decided_by = event.payload.get("decided_by")
    by = f" by {decided_by}" if decided_by is not None else ""
    text = (
        f"{moment} {event.agent_id or '-':<14.14} {event.kind:<12.12} "
        f"{event.tool or '':<18.18} {status:<10.10} {event.reason_code or ''}{by}{blob}"
    )
    return visible_escapes(text)


class TraceView(ScrollView, can_focus=True):
    """Virtual list of trace events with a cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False, id="trace.up"),
        Binding("down", "cursor(1)", "Down", show=False, id="trace.down"),
        Binding("end", "tail", "Follow tail", id="trace.tail"),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "trace--success",
        "trace--empty",
        "trace--degraded",
        "trace--error",
        "trace--decision",
        "trace--cursor",
    }

    @dataclass
    class EventSelected(Message):
        """The cursor moved onto ``event``."""

        event: TraceEvent

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        #: The events shown (the buffer after the filter), oldest first.
        self.events: list[TraceEvent] = []
        self.all_events: list[TraceEvent] = []
        self.trace_filter: TraceFilter = ALL_EVENTS
        self.cursor: int | None = None
        #: True while the view keeps the newest event in sight (from the start).
        self.following = True
        self._strips: LRUCache[tuple[int, bool, int], Strip] = LRUCache(1024)

    @property
    def at_bottom(self) -> bool:
        """True when the last line is visible."""
        return self.scroll_offset.y >= self.max_scroll_y

    def set_events(self, events: list[TraceEvent]) -> None:
        """Replace the buffer (from the service); the view stays on the tail while following."""
        self.all_events = events
        self._show()

    def set_filter(self, trace_filter: TraceFilter) -> None:
        """Show only what ``trace_filter`` matches, from its newest event."""
        self.trace_filter = trace_filter
        self.cursor = None
        self.following = True
        self._show()

    def _show(self) -> None:
        selected = self.events[self.cursor] if self.cursor is not None else None
        events = filter_events(self.all_events, self.trace_filter)
        self.events = events
        self.cursor = None
        if selected is not None:
            self.cursor = next(
                (index for index, event in enumerate(events) if event is selected), None
            )
        self.virtual_size = Size(0, len(events))
        if self.following:
            # Now, forced: the end is known from the virtual size just set, but the scrollbar
            # (which allows scrolling) only appears at the next layout; a scroll deferred to
            # after a refresh could still run before it and be refused, leaving the top shown.
            self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        # A pane above growing shrinks this one: the end moves down, and a follower goes with it.
        if self.following:
            self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)

    def watch_show_vertical_scrollbar(self, shown: bool) -> None:
        # A scroll made while the bar was hidden (the forced follow above) never reached it.
        if shown:
            self.vertical_scrollbar.position = self.scroll_y

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.following = False

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self.call_after_refresh(self._follow_if_at_bottom)

    def _follow_if_at_bottom(self) -> None:
        if self.at_bottom and self.cursor is None:
            self.following = True

    def action_cursor(self, delta: int) -> None:
        if not self.events:
            return
        self.following = False
        current = len(self.events) - 1 if self.cursor is None else self.cursor + delta
        self.cursor = max(0, min(len(self.events) - 1, current))
        self.scroll_to_region_of(self.cursor)
        self.refresh()
        self.post_message(self.EventSelected(self.events[self.cursor]))

    def scroll_to_region_of(self, index: int) -> None:
        top = self.scroll_offset.y
        height = self.scrollable_content_region.height
        if index < top:
            self.scroll_to(y=index, animate=False)
        elif index >= top + height:
            self.scroll_to(y=index - height + 1, animate=False)

    def action_tail(self) -> None:
        self.cursor = None
        self.following = True
        self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)
        self.refresh()

    def on_click(self, event: object) -> None:
        offset = getattr(event, "y", None)
        if isinstance(offset, int):
            index = offset + self.scroll_offset.y
            if 0 <= index < len(self.events):
                self.cursor = index - 1
                self.action_cursor(1)

    def render_line(self, y: int) -> Strip:
        index = y + self.scroll_offset.y
        width = self.scrollable_content_region.width
        if index >= len(self.events):
            return Strip.blank(width, self.rich_style)
        event = self.events[index]
        key = (event.event_id or -1 - index, index == self.cursor, width)
        cached = self._strips.get(key) if event.event_id is not None else None
        if cached is not None:
            return cached
        style = self.rich_style
        component = OUTCOME_CLASSES.get(event.outcome_status or "")
        if component:
            style = style + self.get_component_rich_style(component)
        if index == self.cursor:
            style = style + self.get_component_rich_style("trace--cursor")
        strip = Strip([Segment(_event_text(event), style)]).adjust_cell_length(width, style)
        self._strips[key] = strip
        return strip

    def notify_style_update(self) -> None:
        self._strips.clear()
        super().notify_style_update()
