"""What the CLI prints: one escaped line at a time, escaped JSON, typed errors in one line.

Text from the ledger (ids, names, arguments, actors) is untrusted: every human-facing line goes
through :func:`visible_escapes` as a whole, after it is composed, so a newline or an escape
sequence inside a field can neither start a fake line nor drive the terminal. JSON output keeps
non-ASCII text readable and escapes the same characters as JSON ``\\uXXXX`` escapes.
"""

from __future__ import annotations

from typing import Any

import click

from supervisor.errors import SupervisorError
from supervisor.services.rendering import dumps_visible, visible_escapes, visible_json


def echo_line(line: str, *, err: bool = False) -> None:
    """Print ``line`` as exactly one terminal line (its own newlines are escaped too)."""
    click.echo(visible_escapes(line), err=err)


def echo_json(value: Any, *, indent: int | None = 2) -> None:
    """Print ``value`` as one JSON document with hidden characters escaped."""
    click.echo(dumps_visible(value, indent=indent))


def echo_json_text(document: str) -> None:
    """Print an already serialised JSON document (e.g. a model's JSON) with escapes."""
    click.echo(visible_json(document))


def echo_error(error: SupervisorError) -> None:
    """The one-line form of a typed error (and its hint, indented, on the next line)."""
    echo_line(f"error [{error.code}]: {error.message}", err=True)
    if error.hint:
        echo_line(f"  {error.hint}", err=True)
