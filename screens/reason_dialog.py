"""Asks for a decision reason (required for reject, optional for cancel)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from screens.key_hints import key_hints, key_line
from screens.literal import literal_lines


class ReasonDialog(ModalScreen[str | None]):
    """Dismisses with the reason, or ``None`` when abandoned."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "abandon", "Back", id="reason.back")]

    def __init__(self, title: str, *, required: bool = True) -> None:
        super().__init__()
        self.title_text = title
        self.required = required

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(literal_lines(self.title_text), classes="dialog-question")
            yield Input(placeholder="reason", id="reason-input")
            yield Static("", id="reason-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Submit", variant="primary", id="reason-submit")
                yield Button("Back", id="reason-back")
            yield key_line(key_hints([*self.BINDINGS], [("Enter", "Submit")]))

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def _submit(self) -> None:
        reason = self.query_one(Input).value.strip()
        if self.required and not reason:
            self.query_one("#reason-error", Static).update("A reason is required.")
            return
        self.dismiss(reason)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "reason-submit":
            self._submit()
        else:
            self.dismiss(None)

    def action_abandon(self) -> None:
        self.dismiss(None)
