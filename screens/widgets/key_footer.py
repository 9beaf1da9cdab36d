"""The footer of key hints, rebuilt only when the keys it shows changed."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import Footer


def shown_keys(screen: Screen[Any]) -> list[tuple[str, object, bool, str]]:
    """What the footer draws from: each active binding's key, definition, state and tooltip."""
    return [
        (key, active.binding, active.enabled, active.tooltip)
        for key, active in screen.active_bindings.items()
    ]


class KeyFooter(Footer):
    """Textual's footer, minus the rebuilds that would draw the same keys again.

    The screen refreshes its bindings whenever the selection, the detail or the focus moves
    (several times a second while the inbox loads), and the footer answers each refresh by
    recomposing every key widget, styles and all: most of the main loop's work at start-up.
    """

    _shown: list[tuple[str, object, bool, str]] | None = None

    def bindings_changed(self, screen: Screen[Any]) -> None:
        shown = shown_keys(screen)
        if self._bindings_ready and shown == self._shown:
            return
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self._shown = shown  # what the rebuild below will draw
        super().bindings_changed(screen)
