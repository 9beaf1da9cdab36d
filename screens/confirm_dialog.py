"""A yes/no confirmation (second confirmation for high-risk approvals, batch approval)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from screens.key_hints import key_hints, key_line
from screens.literal import literal_lines


class ConfirmDialog(ModalScreen[bool]):
    """Dismisses with ``True`` only when the confirm button (or ``y``) is pressed."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, question: str, confirm_label: str = "Confirm") -> None:
        super().__init__()
        self.question = question
        self.confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(literal_lines(self.question), classes="dialog-question")
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.confirm_label, variant="warning", id="confirm-yes")
                yield Button("Back", id="confirm-no")
            yield key_line(
                key_hints(
                    self.BINDINGS,
                    [("Tab", "next button"), ("Enter", "press it")],
                    labels={"confirm.yes": self.confirm_label, "confirm.no": "Back"},
                )
            )

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
