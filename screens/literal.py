"""Text from the ledger or a reviewed trace, as the TUI shows it: literal and escaped.

Every name, command, id, reason or error message that came from outside the app is data. A
plain ``str`` given to a ``DataTable`` cell, ``Static``, ``Select`` prompt or ``notify()`` is
parsed as Textual markup: ``[/]`` raises ``MarkupError`` (and kills the app), ``[bold]`` or
``[link=...]`` restyle the screen or add hyperlinks, ``[@click=app.quit]`` binds an action.
These helpers are the one way such text reaches a widget: control, bidi and invisible
characters become visible escapes (:func:`~supervisor.services.rendering.visible_escapes`,
the same escaping as the arguments view) and the result is a :class:`rich.text.Text`, which
no widget parses.
"""

from __future__ import annotations

import re

from rich.text import Text

from supervisor.services.rendering import visible_escapes

_LINE_BREAK = re.compile(r"\r\n|\n|\r")


def escaped(value: object) -> str:
    """``value`` as one line: every control (line breaks too), bidi or invisible character
    escaped. Use it to build a string that is then wrapped by :func:`literal`."""
    return visible_escapes(str(value))


def escaped_lines(value: object) -> str:
    """Like :func:`escaped`, but line breaks (``\\n``, ``\\r\\n``, ``\\r``) stay line breaks."""
    return "\n".join(visible_escapes(line) for line in _LINE_BREAK.split(str(value)))


def literal(value: object) -> Text:
    """``value`` escaped to one line, as text no widget parses for markup."""
    return Text(escaped(value))


def literal_lines(value: object) -> Text:
    """``value`` escaped line by line, as text no widget parses for markup."""
    return Text(escaped_lines(value))
