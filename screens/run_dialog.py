"""A small modal that asks for MODULE:FACTORY and the input of a supervised run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from screens.key_hints import key_hints, key_line


@dataclass(frozen=True)
class RunRequest:
    """What the operator asked to run."""

    reference: str
    text: str


class RunDialog(ModalScreen[RunRequest | None]):
    """Dismisses with a :class:`RunRequest`, or ``None`` when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Back", id="run-dialog.cancel"),
    ]

    def __init__(self, reference: str = "") -> None:
        super().__init__()
        self.reference = reference

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Start a supervised run", classes="dialog-question", markup=False)
            yield Input(self.reference, placeholder="MODULE:FACTORY", id="run-reference")
            yield Input(placeholder="input for the agent", id="run-input")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Start", variant="primary", id="run-start")
                yield Button("Back", id="run-cancel")
            yield key_line(key_hints(self.BINDINGS, [("Enter", "next field, then Start")]))

    def on_mount(self) -> None:
        self.query_one("#run-reference", Input).focus()

    def _submit(self) -> None:
        reference = self.query_one("#run-reference", Input).value.strip()
        text = self.query_one("#run-input", Input).value.strip()
        if ":" not in reference or not text:
            self.notify("Give MODULE:FACTORY and an input.", severity="warning")
            return
        self.dismiss(RunRequest(reference, text))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "run-reference":
            self.query_one("#run-input", Input).focus()
        else:
            self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "run-start":
            self._submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
