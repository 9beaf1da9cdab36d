"""The main screen's footer: its keys on one line, drawn by one widget.

Textual's ``Footer`` builds a widget per key (about twenty here) and rebuilds them all, styles
and layout included, whenever the screen's bindings change: several times while the inbox
loads, which was a sixth of the time to a usable first screen. This footer keeps the same look
(key, description, disabled keys dimmed, the command palette key on the right) and the same
mouse behaviour (a click presses the key; hover highlights it) as text on one line: a change of
keys is a repaint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widget import Widget


@dataclass(frozen=True)
class FooterEntry:
    """One key the footer shows."""

    key: str
    display: str
    description: str
    action: str
    enabled: bool
    tooltip: str


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    entry: FooterEntry


def footer_entries(screen: Screen[Any]) -> tuple[list[FooterEntry], FooterEntry | None]:
    """The shown keys of ``screen`` (one per action, in binding order) and, apart, the command
    palette's key when the app has the palette."""
    app = screen.app
    active = screen.active_bindings
    entries: list[FooterEntry] = []
    seen: set[str] = set()
    palette_key = app.COMMAND_PALETTE_BINDING if app.ENABLE_COMMAND_PALETTE else None
    for key, (_node, binding, enabled, tooltip) in active.items():
        if not binding.show or binding.action in seen or key == palette_key:
            continue
        seen.add(binding.action)
        entries.append(
            FooterEntry(
                binding.key,
                app.get_key_display(binding),
                binding.description,
                binding.action,
                enabled,
                tooltip,
            )
        )
    palette: FooterEntry | None = None
    if palette_key is not None and palette_key in active:
        _node, binding, enabled, tooltip = active[palette_key]
        palette = FooterEntry(
            binding.key,
            app.get_key_display(binding),
            binding.description,
            binding.action,
            enabled,
            binding.tooltip or binding.description,
        )
    return entries, palette


class KeyFooter(Widget, can_focus=False):
    """The keys of the screen it is on, as one line; redrawn only when they change.

    Args:
        compact: Textual's compact footer spacing (no padding around the key).
    """

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "key-footer--item",
        "key-footer--key",
        "key-footer--description",
        "key-footer--hover",
        "key-footer--edge",
    }
    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        .key-footer--item {
            background: $footer-item-background;
        }
        .key-footer--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .key-footer--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        .key-footer--hover {
            color: $footer-key-foreground;
            background: $block-hover-background;
        }
        .key-footer--edge {
            color: $foreground 20%;
        }
    }
    """

    def __init__(self, *, compact: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.compact = compact
        #: The keys shown (the palette's apart), as last computed from the screen's bindings.
        self.entries: list[FooterEntry] = []
        self.palette: FooterEntry | None = None
        self._spans: list[_Span] = []
        self._hover: FooterEntry | None = None

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def bindings_changed(self, screen: Screen[Any]) -> None:
        """The screen's bindings were refreshed: repaint if the keys shown changed."""
        if not self.is_attached or screen is not self.screen:
            return
        entries, palette = footer_entries(screen)
        if entries == self.entries and palette == self.palette:
            return
        self.entries, self.palette = entries, palette
        self.refresh()

    def visible_entries(self) -> list[FooterEntry]:
        """The keys drawn whole within the footer's width, the palette's last."""
        return [span.entry for span in self._spans]

    # -- drawing ----------------------------------------------------------------------------

    def _entry_text(self, entry: FooterEntry, *, palette: bool = False) -> Text:
        item = self.get_component_rich_style("key-footer--item")
        base = self.rich_style + item
        if entry == self._hover:
            base += self.get_component_rich_style("key-footer--hover")
        if not entry.enabled:
            base += Style(dim=True)
        key_style = self.get_component_rich_style("key-footer--key")
        description_style = self.get_component_rich_style("key-footer--description")
        pad = "" if self.compact else " "
        if not entry.description:
            text = Text.assemble((entry.display, key_style))
        elif self.compact:
            text = Text.assemble(
                (entry.display, key_style), (" " + entry.description, description_style)
            )
        else:
            text = Text.assemble(
                (pad + entry.display + pad, key_style),
                (entry.description + (" " if not palette else ""), description_style),
            )
        text.stylize_before(base)
        return text

    def render(self) -> Text:
        width = self.size.width
        line = Text(no_wrap=True, overflow="crop", end="")
        spans: list[_Span] = []
        tail = Text(no_wrap=True, end="")
        if self.palette is not None:
            edge = self.get_component_rich_style("key-footer--edge")
            tail = Text.assemble(
                ("▏", self.rich_style + edge), self._entry_text(self.palette, palette=True)
            )
            if not self.compact:
                tail.append(" ", self.rich_style)
        room = max(0, width - tail.cell_len)
        gap = 1 if self.compact else 0
        for entry in self.entries:
            text = self._entry_text(entry)
            start = line.cell_len
            if start + text.cell_len <= room:
                spans.append(_Span(start, start + text.cell_len, entry))
            line.append_text(text)
            if gap:
                line.append(" " * gap, self.rich_style)
            if line.cell_len >= room:
                break
        line.truncate(room, pad=True)
        line.stylize_before(self.rich_style)
        if self.palette is not None and tail.cell_len <= width:
            start = line.cell_len + 1  # after the edge
            spans.append(_Span(start, start + tail.cell_len - 1, self.palette))
            line.append_text(tail)
        self._spans = spans
        return line

    # -- mouse ------------------------------------------------------------------------------

    def _entry_at(self, x: int) -> FooterEntry | None:
        return next((span.entry for span in self._spans if span.start <= x < span.end), None)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        entry = self._entry_at(event.x)
        if entry != self._hover:
            self._hover = entry
            self.tooltip = entry.tooltip or None if entry is not None else None
            self.refresh()

    def on_leave(self, event: events.Leave) -> None:
        if self._hover is not None:
            self._hover = None
            self.tooltip = None
            self.refresh()

    def on_mouse_down(self, event: events.MouseDown) -> None:
        entry = self._entry_at(event.x)
        if entry is None:
            return
        if entry.enabled:
            self.app.simulate_key(entry.key)
        else:
            self.app.bell()
