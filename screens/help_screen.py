"""``?`` / F1: every key of the screen underneath, what it does, and whether it works now.

Built from the screen's live bindings (its own, the focused widget's and the app's) plus the
screen's keys that are hidden at the moment (an action with nothing to act on), so the list
cannot drift from what the keys really do. Descriptions come from the bindings; the text is
drawn literally.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from screens.key_hints import key_hints, key_line
from screens.literal import literal

HelpRow = tuple[str, str, str]


def _screen_bindings(screen: Screen[object]) -> list[Binding]:
    """The ``Binding`` entries of the screen's class and its bases, most derived first."""
    found: list[Binding] = []
    for cls in type(screen).__mro__:
        for binding in vars(cls).get("BINDINGS", ()):
            if isinstance(binding, Binding):
                found.append(binding)
    return found


def help_rows(screen: Screen[object]) -> list[HelpRow]:
    """``(keys, what, state)`` for every key of ``screen``: state is ``""`` when the key works
    now, ``"not now"`` when its action has nothing to act on (or is hidden until it has)."""
    app = screen.app
    keys: dict[str, list[str]] = {}
    rows: dict[str, tuple[str, str]] = {}
    for active in screen.active_bindings.values():
        binding = active.binding
        keys.setdefault(binding.action, []).append(app.get_key_display(binding))
        state = "" if active.enabled else "not now"
        rows.setdefault(binding.action, (binding.description or binding.action, state))
    for binding in _screen_bindings(screen):
        if binding.action not in rows:
            for key in binding.key.split(","):
                single = Binding(key.strip(), binding.action, binding.description)
                keys.setdefault(binding.action, []).append(app.get_key_display(single))
            rows[binding.action] = (binding.description or binding.action, "not now")
    found = [("/".join(keys[action]), what, state) for action, (what, state) in rows.items()]
    return sorted(found, key=lambda row: (row[2] != "", row[0].lower(), row[0]))


def help_text(rows: list[HelpRow]) -> Text:
    """The rows as aligned columns under a header, literally (one text: a table widget drew
    each cell through Rich, most of the time the help took to open)."""
    header: HelpRow = ("Key", "What it does", "")
    keys_width = max(len(row[0]) for row in [header, *rows])
    what_width = max(len(row[1]) for row in [header, *rows])
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    for index, (keys, what, state) in enumerate([header, *rows]):
        first = "bold underline" if index == 0 else "bold"
        rest = "bold underline" if index == 0 else ""
        if index:
            text.append("\n")
        text.append(keys, first)
        text.append(" " * (keys_width - len(keys) + 2))
        text.append(what, rest)
        if state:
            text.append(" " * (what_width - len(what) + 2))
            text.append(state, "dim")
    return text


class HelpScreen(ModalScreen[None]):
    """The keys of the screen it was opened over."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "close", "Close", id="help.close"),
    ]

    def __init__(self, over: Screen[object]) -> None:
        super().__init__()
        self.rows = help_rows(over)
        self.title_text = f"Keys of this screen ({type(over).__name__})"

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog -wide", id="help"):
            yield Static(literal(self.title_text), classes="dialog-question")
            with VerticalScroll(id="help-scroll"):
                yield Static(help_text(self.rows), id="help-keys", markup=False)
            yield Static(
                literal(
                    "Also: `:` command mode (:proposals, :processes, :grants, :review, "
                    ":theme), Ctrl+P the command palette."
                ),
                classes="dialog-hint",
            )
            yield key_line(key_hints(self.BINDINGS, [("↑/↓", "scroll")]))

    def on_mount(self) -> None:
        self.query_one("#help-scroll", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)
