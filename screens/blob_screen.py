"""A paged viewer for an offloaded result, opened only after its integrity is checked."""

from __future__ import annotations

from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Log, Static

from screens.literal import literal
from screens.messages import BlobLoaded
from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import Blob, TraceEvent
from supervisor.services.rendering import visible_escapes
from supervisor.services.results import ResultsService

PAGE_BYTES = 64 * 1024


class BlobScreen(Screen[None]):
    """Shows one page (64 KiB) of a blob at a time; ``n``/``p`` move between pages."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "page(1)", "Next page", id="blob.next"),
        Binding("p", "page(-1)", "Previous page", id="blob.previous"),
        Binding("escape,q", "app.pop_screen", "Back", id="blob.back"),
    ]

    def __init__(self, event: TraceEvent, *, results: ResultsService) -> None:
        super().__init__()
        self.results = results
        self.event = event
        self.blob: Blob | None = None
        self.page = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="blob-body"):
            yield Static(literal(f"loading {self.event.blob_ref} …"), id="blob-header")
            yield Log(id="blob-log", highlight=False)
        yield Footer()

    def on_mount(self) -> None:
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
        size = len(self.blob.content or b"") if self.blob else 0
        return max(1, -(-size // PAGE_BYTES))

    def on_blob_loaded(self, message: BlobLoaded) -> None:
        header = self.query_one("#blob-header", Static)
        if message.error or message.blob is None:
            header.update(literal(f"{self.event.blob_ref}: {message.error}"))
            self.add_class("-corrupted")
            return
        self.blob = message.blob
        self._show_page()

    def _show_page(self) -> None:
        assert self.blob is not None
        content = self.blob.content or b""
        chunk = content[self.page * PAGE_BYTES : (self.page + 1) * PAGE_BYTES]
        text = chunk.decode("utf-8", errors="replace")
        log = self.query_one(Log)
        log.clear()
        log.write_lines(visible_escapes(line) for line in text.split("\n"))
        log.scroll_home(animate=False)
        self.query_one("#blob-header", Static).update(
            literal(
                f"sha256:{self.blob.sha256}  {self.blob.size:,} bytes  {self.blob.media_type}  "
                f"integrity verified  page {self.page + 1}/{self.pages}"
            )
        )

    def action_page(self, delta: int) -> None:
        if self.blob is None:
            return
        self.page = max(0, min(self.pages - 1, self.page + delta))
        self._show_page()
