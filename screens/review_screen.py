"""Offline review: a ledger or an exported JSONL trace, read-only, indexed in the background.

A thread worker reads the review service's source chunk by chunk into its temporary SQLite
index (:class:`ReviewIndex`) and posts the count after each chunk. The first chunk is one
screen of rows; the worker waits until it was painted before reading on, so indexing the rest
never competes with the first screen. Filters (agent, thread, tool, status, time range, approvals
only) and a search narrow the timeline: a filter worker grows the selection in the index in
steps, and the timeline pages what is on screen out of it. The side panel plots the outcome mix
and the approval latency and lists per-tool statistics, all of the rows shown.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input, Select, Static
from textual.worker import Worker, WorkerState, get_current_worker

from screens.literal import literal
from screens.widgets.review.stats import stats_text
from screens.widgets.review.time_range import TimeBoundInput, is_relative, parse_bound
from screens.widgets.review.timeline import ReviewTimeline
from supervisor.services.review.index import RowsView, Selection
from supervisor.services.review.rows import ReviewFilter, ReviewRow
from supervisor.services.review.service import ReviewService
from supervisor.services.review.stats import ReviewStats
from supervisor.store.urls import shown_url

FILTERS = ("agent", "thread", "tool", "status")
BOUNDS = ("from", "to")


@dataclass
class ReviewChunkIndexed(Message):
    """A chunk of the source was indexed (``first`` for the first, ``done`` after the last)."""

    first: bool
    done: bool


@dataclass
class SelectionGrown(Message):
    """A filter worker grew ``selection`` by a step (``done`` when it covers the index)."""

    selection: Selection
    done: bool


class ReviewScreen(Screen[None]):
    """Read-only timeline, filters, search and statistics of one trace source."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "focus_search", "Search", id="review.search"),
        Binding("n", "next_approval", "Next approval", id="review.next_approval"),
        Binding("a", "approvals_only", "Approvals only", id="review.approvals_only"),
        Binding("s", "toggle_stats", "Stats", id="review.stats"),
        Binding("escape", "clear_filters", "Clear filters", id="review.clear"),
        Binding("q", "app.quit", "Quit", id="review.quit"),
        Binding("b", "back", "Back", id="review.back"),
    ]

    def __init__(self, *, review: ReviewService, closable: bool = False) -> None:
        super().__init__()
        self.closable = closable  # opened over the live screen (`:review`): b goes back
        self.review = review
        self.source = review.source
        self.index = review.index
        self.review_filter = ReviewFilter()
        self.selection: Selection = self.index.everything
        self.shown: Sequence[ReviewRow] = self.index.rows
        self._first_painted = threading.Event()

    @property
    def shown_stats(self) -> ReviewStats:
        """Figures of the rows shown (read them on the UI thread, between steps)."""
        return self.selection.stats

    def compose(self) -> ComposeResult:
        source = shown_url(self.source) if "://" in self.source else self.source
        yield Static(literal(f"Offline review — {source} (read-only)"), id="title-bar")
        with Horizontal(id="review-filters"):
            for name in FILTERS:
                yield Select[str]([], prompt=name, id=f"filter-{name}", allow_blank=True)
            for bound in BOUNDS:
                yield TimeBoundInput(placeholder=f"{bound} ISO|2h", id=f"review-{bound}")
            yield Input(placeholder="search", id="review-search")
        with Horizontal(id="review-body"):
            yield ReviewTimeline(summary_of=self.index.summary_of, id="review-timeline")
            with Vertical(id="review-side"):
                yield Static("", id="review-stats", markup=False)
        yield Static("indexing …", id="review-status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.load_source()

    def on_unmount(self) -> None:
        self.workers.cancel_node(self)  # the app closes the review (and its index) after this
        if self.closable:  # opened over the live screen: this screen owns the review
            self.review.close()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return self.closable
        return True

    def action_back(self) -> None:
        self.dismiss(None)

    @work(thread=True, exit_on_error=False, group="review")
    def load_source(self) -> None:
        worker = get_current_worker()
        for number, chunk in enumerate(self.review.chunks()):
            if worker.is_cancelled or self.index.closed:
                return
            self.index.add(chunk)
            del chunk  # the index holds the rows now
            self.post_message(ReviewChunkIndexed(number == 0, False))
            if number == 0:
                self._first_painted.wait(timeout=2.0)
        self.index.finish()
        self.post_message(ReviewChunkIndexed(False, True))

    @work(thread=True, exclusive=True, exit_on_error=False, group="review-filter")
    def grow_selection(self, selection: Selection) -> None:
        """Grow ``selection`` to cover every indexed row, posting after each step."""
        worker = get_current_worker()
        if self.index.closed:
            return
        connection = self.index.connect()
        try:
            self.index.drop_retired(connection)
            done = selection.advance(
                connection,
                self.index.count,
                cancelled=lambda: worker.is_cancelled or self.index.closed,
                on_step=lambda: self._post_grown(selection),
            )
        finally:
            connection.close()
        if done:
            self.post_message(SelectionGrown(selection, True))

    def _post_grown(self, selection: Selection) -> None:
        self.post_message(SelectionGrown(selection, False))

    def on_review_chunk_indexed(self, message: ReviewChunkIndexed) -> None:
        if message.done:
            self.index.complete = True
        if message.first or message.done:
            self._refresh_options()
        if message.done and self._has_relative_bound():
            self._update_filter()  # relative bounds count back from the last event
            return
        if self.selection is not self.index.everything:
            self.grow_selection(self.selection)
        self._show(keep_cursor=True)
        if message.first:
            self.call_after_refresh(self._first_painted.set)

    def on_selection_grown(self, message: SelectionGrown) -> None:
        if message.selection is self.selection:
            self._show(keep_cursor=True)

    def _refresh_options(self) -> None:
        for name in FILTERS:
            values = self.index.facet(name)
            select: Select[str] = self.query_one(f"#filter-{name}", Select)
            current = select.value
            with self.prevent(Select.Changed):
                # A str prompt is parsed as markup; the values are names from the trace.
                select.set_options((literal(value), value) for value in values)
                if isinstance(current, str) and current in values:
                    select.value = current

    def _apply(self) -> None:
        """Select the rows passing the filters again (after a filter changed)."""
        selection = self.index.selection(self.review_filter)
        if selection is not self.selection:
            self.index.retire(self.selection)
        self.selection = selection
        self.shown = RowsView(self.index, selection)
        if selection is not self.index.everything:
            self.grow_selection(selection)
        self._show()

    def _show(self, keep_cursor: bool = False) -> None:
        rows = self.shown
        self.query_one(ReviewTimeline).set_rows(rows, keep_cursor=keep_cursor)
        with self.selection.stats_lock:
            text = stats_text(self.selection.stats)
        self.query_one("#review-stats", Static).update(text)
        if not self.index.complete:
            state = "indexing …"
        elif self.selection.covered < self.index.count:
            state = "filtering …"
        else:
            state = "indexed"
        self.query_one("#review-status", Static).update(
            f"{len(rows):,} of {self.index.count:,} events shown — {state}"
        )

    def _filter_values(self) -> dict[str, str]:
        values: dict[str, str] = {}
        for name in FILTERS:
            value = self.query_one(f"#filter-{name}", Select).value
            values[name] = value if isinstance(value, str) else ""
        return values

    def _has_relative_bound(self) -> bool:
        values = (self.query_one(f"#review-{b}", Input).value.strip() for b in BOUNDS)
        return any(is_relative(value) for value in values)

    def _bounds(self) -> tuple[datetime | None, datetime | None]:
        """The parsed time range; a bound that does not parse is marked and ignored."""
        anchor = self.index.last_at or datetime.now(UTC)
        parsed: list[datetime | None] = []
        for bound in BOUNDS:
            field = self.query_one(f"#review-{bound}", TimeBoundInput)
            try:
                parsed.append(parse_bound(field.value, anchor))
                field.remove_class("-invalid")
            except ValueError:
                parsed.append(None)
                field.add_class("-invalid")
        return parsed[0], parsed[1]

    def _update_filter(self) -> None:
        since, until = self._bounds()
        self.review_filter = ReviewFilter(
            **self._filter_values(),
            text=self.query_one("#review-search", Input).value,
            since=since,
            until=until,
            approvals_only=self.review_filter.approvals_only,
        )
        self._apply()

    def on_select_changed(self, event: Select.Changed) -> None:
        self._update_filter()

    def on_input_changed(self, event: Input.Changed) -> None:
        self._update_filter()

    def action_focus_search(self) -> None:
        self.set_focus(self.query_one("#review-search", Input))  # at once, before queued keys

    def action_next_approval(self) -> None:
        """Move the timeline cursor to the next approval event (wrapping around)."""
        timeline = self.query_one(ReviewTimeline)
        start = -1 if timeline.cursor is None else timeline.cursor
        position = self.index.next_approval(self.selection, start)
        if position is None and start >= 0:
            position = self.index.next_approval(self.selection, -1)  # wrap around
        if position is not None:
            timeline.move_cursor(position)
            self.set_focus(timeline)
            return
        self.notify("No approval events among the rows shown.", title="Jump to approvals")

    def action_approvals_only(self) -> None:
        """Show only approval events, or everything again."""
        only = not self.review_filter.approvals_only
        self.review_filter = replace(self.review_filter, approvals_only=only)
        self._apply()

    def action_toggle_stats(self) -> None:
        self.query_one("#review-side").toggle_class("-hidden")

    def action_clear_filters(self) -> None:
        self.review_filter = ReviewFilter()
        for name in FILTERS:
            self.query_one(f"#filter-{name}", Select).clear()
        for name in ("review-search", *(f"review-{bound}" for bound in BOUNDS)):
            self.query_one(f"#{name}", Input).value = ""
        self._apply()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if self.index.closed:
            return
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            text = getattr(error, "message", None) or str(error)
            self.query_one("#review-status", Static).update(
                literal(f"cannot read {self.source}: {text}")
            )
            self.notify(text, title="Review failed", severity="error")
