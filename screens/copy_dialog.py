"""``y`` (yank): copy the selected proposal's id, args hash or arguments, or the selected
process id, to the clipboard.

The copy goes out as an OSC 52 sequence (Textual's ``App.copy_to_clipboard``), which the
terminal (and tmux with ``set-clipboard on``) puts on the system clipboard, over SSH too.
Arguments are copied as canonical JSON with control, bidi and invisible characters written as
``\\uXXXX`` escapes: the same value, but pasting it into a shell or an editor cannot reorder
or hide what it says.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from screens.key_hints import key_hints, key_line
from screens.literal import literal
from supervisor.ledger.models import Proposal
from supervisor.services.rendering import dumps_visible

#: What can be copied: (key, label) in the order offered.
CHOICES = (("i", "proposal id"), ("h", "args hash"), ("a", "arguments (JSON)"),
           ("p", "process id"))  # fmt: skip


def copy_texts(proposal: Proposal | None, process_id: str | None) -> dict[str, str]:
    """The texts on offer by key (only those there is something for)."""
    texts: dict[str, str] = {}
    if proposal is not None:
        texts["i"] = proposal.proposal_id
        texts["h"] = proposal.args_hash
        texts["a"] = dumps_visible(proposal.arguments, sort_keys=True)
    if process_id is not None:
        texts["p"] = process_id
    return texts


class CopyDialog(ModalScreen[tuple[str, str] | None]):
    """Dismisses with ``(label, text)`` for the key pressed, ``None`` on Esc."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("i", "pick('i')", "Id", id="copy.id"),
        Binding("h", "pick('h')", "Args hash", id="copy.hash"),
        Binding("a", "pick('a')", "Arguments", id="copy.arguments"),
        Binding("p", "pick('p')", "Process id", id="copy.process"),
        Binding("escape", "close", "Back", id="copy.back"),
    ]

    def __init__(self, texts: dict[str, str]) -> None:
        super().__init__()
        self.texts = texts

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="copy-dialog"):
            yield Static(literal("Copy to the clipboard (OSC 52)"), classes="dialog-question")
            for key, label in CHOICES:
                if key in self.texts:
                    shown = self.texts[key]
                    shown = shown if len(shown) <= 48 else shown[:47] + "…"
                    yield Static(literal(f"{key}  {label}: {shown}"), classes="copy-choice")
            bindings = [b for b in self.BINDINGS if isinstance(b, Binding) and
                        (b.key == "escape" or b.key in self.texts)]  # fmt: skip
            yield key_line(key_hints(bindings))

    def action_pick(self, key: str) -> None:
        if key in self.texts:
            self.dismiss((dict(CHOICES)[key], self.texts[key]))

    def action_close(self) -> None:
        self.dismiss(None)
