"""Follow a supervised run's output: a log viewer tailing the run's log file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Log, Static

from screens.literal import escaped_lines, literal
from supervisor.services.process_control import read_tail

MAX_LINES = 10_000


@dataclass
class LogTextRead(Message):
    """New text was read from the followed log file, up to byte ``end_offset``."""

    text: str
    end_offset: int


class LogScreen(Screen[None]):
    """Tails ``log_path`` (bounded to the last lines), following while at the bottom."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back", id="log.back"),
        Binding("k", "stop", "Stop run", id="log.stop"),
    ]

    def __init__(
        self,
        process_id: str,
        log_path: Path,
        *,
        stopper: Callable[[str], object] | None = None,
        interval: float = 0.2,
    ) -> None:
        super().__init__()
        self.stopper = stopper
        self.process_id = process_id
        self.log_path = log_path
        self.interval = interval
        self.read_offset = 0

    def compose(self) -> ComposeResult:
        yield Static(literal(f"Run {self.process_id} — {self.log_path}"), id="title-bar")
        yield Log(max_lines=MAX_LINES, id="run-log")
        yield Footer()

    def on_mount(self) -> None:
        self.read_more()
        self.set_interval(self.interval, self.read_more)

    @work(thread=True, exit_on_error=False, group="log-tail", exclusive=True)
    def read_more(self) -> None:
        text, offset = read_tail(self.log_path, self.read_offset)
        if text:
            self.post_message(LogTextRead(text, offset))

    def on_log_text_read(self, message: LogTextRead) -> None:
        if message.end_offset <= self.read_offset:
            return
        self.read_offset = message.end_offset
        # The run's output is untrusted: escape controls (ESC, OSC, bidi) line by line.
        self.query_one(Log).write(escaped_lines(message.text))

    @property
    def text(self) -> str:
        """Everything shown so far."""
        return "\n".join(self.query_one(Log).lines)

    def action_stop(self) -> None:
        if self.stopper is not None:
            self.stopper(self.process_id)
