"""``:`` command mode, as in k9s and vim: type a command, Tab completes it, Enter runs it.

The commands are the screen's own actions under names an operator remembers
(:data:`COMMANDS`); ``:theme NAME`` switches the theme (``:theme`` alone opens the picker). An
unknown command says so and lists the known ones, and nothing runs.
"""

from __future__ import annotations

from typing import ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Static

from screens.key_hints import key_hints, key_line
from screens.literal import literal

#: command -> (what it does, the main screen's action that does it).
COMMANDS: dict[str, tuple[str, str]] = {
    "proposals": ("the approval inbox", "focus_inbox"),
    "processes": ("agents and processes", "focus_processes"),
    "trace": ("the live trace", "focus_trace"),
    "sessions": ("group the inbox by runtime and session (again: oldest first)", "group_sessions"),
    "grants": ("the grants view", "grants_view"),
    "review": ("offline review of this ledger's trace", "open_review"),
    "theme": ("switch the theme (:theme NAME)", "theme"),
    "help": ("every key of this screen", "app.help"),
    "quit": ("leave the supervisor", "app.quit"),
}


def parse_command(text: str, themes: list[str]) -> tuple[str, str] | str:
    """``(command, argument)`` for ``text`` (a unique prefix of a command is enough), or the
    error to show."""
    words = text.strip().lstrip(":").split(maxsplit=1)
    if not words:
        return "type a command: " + ", ".join(COMMANDS)
    name, argument = words[0].lower(), (words[1].strip() if len(words) > 1 else "")
    found = [command for command in COMMANDS if command.startswith(name)]
    if name in COMMANDS:
        found = [name]
    if len(found) != 1:
        known = ", ".join(found or COMMANDS)
        return f"no command {name!r}; " + (f"did you mean {known}?" if found else f"try {known}")
    if found[0] == "theme" and argument and argument not in themes:
        return f"no theme {argument!r}; try " + ", ".join(themes[:8]) + " …"
    return found[0], argument


class CommandBar(ModalScreen[tuple[str, str] | None]):
    """Dismisses with ``(command, argument)``, or ``None`` when Esc is pressed."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", id="command.back"),
    ]

    def __init__(self, themes: list[str]) -> None:
        super().__init__()
        self.themes = themes
        completions = [f"{name}" for name in COMMANDS if name != "theme"]
        completions += [f"theme {theme}" for theme in themes] + ["theme"]
        self.suggester = SuggestFromList(completions, case_sensitive=False)

    def compose(self) -> ComposeResult:
        with Vertical(id="command-bar"):
            yield Input(placeholder=":command  (Tab completes)", id="command-input",
                        suggester=self.suggester)  # fmt: skip
            yield Static("", id="command-error", markup=False)
            yield Static(
                literal("  ".join(f":{name} {what}" for name, (what, _) in COMMANDS.items())),
                id="command-list",
            )
            yield key_line(key_hints(self.BINDINGS, [("Tab", "complete"), ("Enter", "run")]))

    def on_mount(self) -> None:
        self.query_one("#command-input", Input).focus()

    def on_key(self, event: events.Key) -> None:
        """Tab accepts the suggestion (as → at the end of the line does) instead of moving the
        focus away."""
        if event.key == "tab":
            field = self.query_one("#command-input", Input)
            field.cursor_position = len(field.value)
            field.action_cursor_right()
            event.prevent_default()
            event.stop()

    @on(Input.Submitted, "#command-input")
    def run_command(self, event: Input.Submitted) -> None:
        parsed = parse_command(event.value, self.themes)
        if isinstance(parsed, str):
            self.query_one("#command-error", Static).update(literal(parsed))
            return
        self.dismiss(parsed)

    def action_close(self) -> None:
        self.dismiss(None)
