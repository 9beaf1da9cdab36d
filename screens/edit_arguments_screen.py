"""Edit a proposal's arguments: canonical JSON in an editor, validated, with a live diff."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static, TextArea

from screens.key_hints import key_hints, key_line
from screens.literal import escaped, literal, literal_lines
from supervisor.ledger.models import Proposal
from supervisor.ledger.policy import diff_arguments
from supervisor.services.edits import InvalidEdit, parse_edited_arguments
from supervisor.services.rendering import render_arguments


def diff_text(changes: list[dict[str, Any]]) -> str:
    """A short human diff: one line per changed path."""
    if not changes:
        return "no changes"
    lines = []
    for change in changes:
        old = json.dumps(change.get("old"), ensure_ascii=False)
        new = json.dumps(change.get("new"), ensure_ascii=False)
        lines.append(escaped(f"{change['op']:<7} {change['path']}: {old} → {new}"))
    return "\n".join(lines)


class EditArgumentsScreen(ModalScreen[dict[str, Any] | None]):
    """Dismisses with the new arguments once they parse, validate and differ."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save as new proposal", id="edit.save"),
        Binding("escape", "abandon", "Back", id="edit.back"),
    ]

    def __init__(self, proposal: Proposal, schema: dict[str, Any] | None) -> None:
        super().__init__()
        self.proposal = proposal
        self.schema = schema

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog -wide"):
            yield Static(
                literal(
                    f"Edit arguments of {self.proposal.tool_name} "
                    f"({'checked against the tool schema' if self.schema else 'JSON object'})"
                ),
                classes="dialog-question",
            )
            # The arguments view's lines: invisible characters inside the JSON strings are
            # shown as JSON escapes, which parse back to the same characters on save.
            text = "\n".join(render_arguments(self.proposal.arguments))
            yield TextArea(text, language="json", id="edit-text", show_line_numbers=True)
            yield Static("no changes", id="edit-diff", markup=False)
            yield Static("", id="edit-error", classes="dialog-error", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save as new proposal", variant="primary", id="edit-save")
                yield Button("Back", id="edit-back")
            yield key_line(key_hints(self.BINDINGS))

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def _parse(self) -> dict[str, Any] | None:
        error = self.query_one("#edit-error", Static)
        try:
            arguments = parse_edited_arguments(self.query_one(TextArea).text, self.schema)
        except InvalidEdit as problem:
            error.update(literal_lines(problem.message))
            return None
        error.update("")
        self.query_one("#edit-diff", Static).update(
            literal_lines(diff_text(diff_arguments(self.proposal.arguments, arguments)))
        )
        return arguments

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        self._parse()

    def action_save(self) -> None:
        arguments = self._parse()
        if arguments is None:
            return
        if not diff_arguments(self.proposal.arguments, arguments):
            self.query_one("#edit-error", Static).update("Nothing changed.")
            return
        self.dismiss(arguments)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "edit-save":
            self.action_save()
        else:
            self.dismiss(None)

    def action_abandon(self) -> None:
        self.dismiss(None)
