"""Approving an orphan: its agent is gone, so approving alone would run nothing.

The dialog says so (which process waited, and since when it is gone) and offers the three
answers: approve and resume it in a new supervised process, approve only (resume later with
``supervisor resume``), or go back.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from screens.key_hints import key_hints, key_line
from screens.literal import literal_lines

OrphanAnswer = Literal["resume", "approve"]


class OrphanDialog(ModalScreen[OrphanAnswer | None]):
    """Dismisses with ``"resume"``, ``"approve"`` or ``None`` (back)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("R", "answer('resume')", "Approve and resume", id="orphan.resume"),
        Binding("a", "answer('approve')", "Approve only", id="orphan.approve"),
        Binding("escape", "answer(None)", "Back", id="orphan.back"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(literal_lines(self.question), classes="dialog-question")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Approve and resume", variant="warning", id="orphan-resume")
                yield Button("Approve only", id="orphan-approve")
                yield Button("Back", id="orphan-back")
            yield key_line(
                key_hints(self.BINDINGS, [("Tab", "next button"), ("Enter", "press it")])
            )

    def on_mount(self) -> None:
        self.query_one("#orphan-back", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        answers: dict[str | None, OrphanAnswer | None] = {
            "orphan-resume": "resume",
            "orphan-approve": "approve",
        }
        self.dismiss(answers.get(event.button.id))

    def action_answer(self, answer: OrphanAnswer | None) -> None:
        self.dismiss(answer)
