"""A paged viewer for an offloaded result, opened only after its integrity is checked.

JSON is pretty-printed (``j`` switches to the raw text and back) and ``/`` searches the shown
text: ``n`` / ``N`` go to the next / previous matching line, across pages; ``]`` / ``[`` turn
pages. The pages and the search are :class:`~supervisor.services.result_view.ResultView`'s.
"""

from __future__ import annotations

from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Input, Log, Static

from screens.literal import literal
from screens.messages import BlobLoaded
from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import Blob, TraceEvent
from supervisor.services.result_view import Match, ResultView
from supervisor.services.results import ResultsService


class BlobScreen(Screen[None]):
    """Shows one page of a result at a time, pretty JSON or raw, with search."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # A priority binding (so no widget takes the key first), off while typing a search.
        Binding("slash", "search", "Search", id="blob.search", priority=True),
        Binding("n", "match(1)", "Next match", id="blob.next-match"),
        Binding("N", "match(-1)", "Previous match", id="blob.previous-match"),
        Binding("right_square_bracket", "page(1)", "Next page", id="blob.next"),
        Binding("left_square_bracket", "page(-1)", "Previous page", id="blob.previous"),
        Binding("j", "toggle_json", "Raw/pretty", id="blob.json"),
        Binding("escape,q", "back", "Back", id="blob.back"),
    ]

    def __init__(self, event: TraceEvent, *, results: ResultsService) -> None:
        super().__init__()
        self.results = results
        self.event = event
        self.blob: Blob | None = None
        self.view: ResultView | None = None
        self.page = 0
        self.query_text = ""
        self.matches: list[Match] = []
        self.match_index = -1

    def compose(self) -> ComposeResult:
        with Vertical(id="blob-body"):
            yield Static(literal(f"loading {self.event.blob_ref} …"), id="blob-header")
            yield Input(placeholder="search the result (Enter; Esc closes)", id="blob-search")
            yield Log(id="blob-log", highlight=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#blob-search", Input).display = False
        self.query_one(Log).focus()  # not the hidden search box, which would take every key
        self.load_blob()

    @work(thread=True, exit_on_error=False)
    def load_blob(self) -> None:
        try:
            blob = self.results.read(self.event.blob_ref or "")
        except LedgerError as error:
            self.post_message(BlobLoaded(self.event, None, error.message))
            return
        self.post_message(BlobLoaded(self.event, blob, None if blob else "not in this ledger"))

    @property
    def pages(self) -> int:
        return len(self.view.pages) if self.view else 1

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "match":
            return True if self.matches else None
        if action == "search":
            return not self.query_one("#blob-search", Input).has_focus
        if action == "toggle_json":
            return True if self.view is not None and self.view.is_json else None
        return True

    def on_blob_loaded(self, message: BlobLoaded) -> None:
        header = self.query_one("#blob-header", Static)
        if message.error or message.blob is None:
            header.update(literal(f"{self.event.blob_ref}: {message.error}"))
            self.add_class("-corrupted")
            return
        self.blob = message.blob
        self.view = ResultView(message.blob.content or b"", pretty=True)
        self.refresh_bindings()
        self._show_page()

    def _show_page(self, line: int = 0) -> None:
        assert self.blob is not None and self.view is not None
        log = self.query_one(Log)
        log.clear()
        log.write_lines(self.view.pages[self.page])
        log.scroll_to(y=line, animate=False)
        where = ""
        if self.query_text:
            found = len(self.matches)
            at = f"{self.match_index + 1}/{found}" if self.match_index >= 0 else f"{found}"
            where = f"  search {self.query_text!r}: " + (f"match {at}" if found else "no match")
        self.query_one("#blob-header", Static).update(
            literal(
                f"sha256:{self.blob.sha256}  {self.blob.size:,} bytes  {self.blob.media_type}  "
                f"integrity verified  {self.view.mode}  page {self.page + 1}/{self.pages}{where}"
            )
        )

    def action_page(self, delta: int) -> None:
        if self.view is None:
            return
        self.page = max(0, min(self.pages - 1, self.page + delta))
        self._show_page()

    def action_toggle_json(self) -> None:
        if self.blob is None or self.view is None or not self.view.is_json:
            return
        self.view = ResultView(self.blob.content or b"", pretty=not self.view.pretty)
        self.page = 0
        self._find(self.query_text)

    def action_search(self) -> None:
        box = self.query_one("#blob-search", Input)
        box.display = True
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        event.input.display = False
        self.query_one(Log).focus()
        self._find(event.value)

    def _find(self, text: str) -> None:
        if self.view is None:
            return
        self.query_text = text
        self.matches = self.view.search(text) if text else []
        self.match_index = -1
        self.refresh_bindings()
        if self.matches:
            self.action_match(1)
        else:
            self._show_page()

    def action_match(self, delta: int) -> None:
        if not self.matches:
            return
        self.match_index = (self.match_index + delta) % len(self.matches)
        found = self.matches[self.match_index]
        self.page = found.page
        self._show_page(line=found.line)

    def action_back(self) -> None:
        box = self.query_one("#blob-search", Input)
        if box.display:
            box.display = False
            self.query_one(Log).focus()
            return
        self.app.pop_screen()
