"""The key line of a dialog: which key does what, drawn inside the dialog itself.

A modal dialog has no footer of its own, so without this line its keys are a guess. The line
is built from the dialog's own ``BINDINGS`` (plus keys its widgets handle, such as Enter in an
input), so it cannot drift from what the keys really do.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding, BindingType
from textual.widgets import Static

_NAMES = {"escape": "Esc", "enter": "Enter", "tab": "Tab"}


def key_name(key: str) -> str:
    """``escape`` -> ``Esc``, ``ctrl+s`` -> ``Ctrl+S``, ``y`` -> ``y``."""
    if key in _NAMES:
        return _NAMES[key]
    if "+" in key:
        return "+".join(
            part.capitalize() if len(part) > 1 else part.upper() for part in key.split("+")
        )
    return key


def key_hints(
    bindings: Iterable[BindingType],
    extra: Iterable[tuple[str, str]] = (),
    labels: dict[str, str] | None = None,
) -> str:
    """``y Stop · n/Esc Back``: each binding's keys and description, then ``extra`` pairs.

    Args:
        bindings: A screen's ``BINDINGS`` (only :class:`Binding` entries are listed).
        extra: ``(keys, what)`` pairs for keys a widget handles (``("Enter", "Submit")``).
        labels: Descriptions to use instead of a binding's own, by binding id.
    """
    parts: list[str] = []
    for binding in bindings:
        if not isinstance(binding, Binding):
            continue
        keys = "/".join(key_name(key.strip()) for key in binding.key.split(","))
        what = (labels or {}).get(binding.id or "", binding.description)
        parts.append(f"{keys} {what}")
    parts.extend(f"{keys} {what}" for keys, what in extra)
    return "  ·  ".join(parts)


def key_line(text: str) -> Static:
    """The dialog's key line widget (plain text, never markup)."""
    return Static(text, classes="dialog-keys", markup=False)
