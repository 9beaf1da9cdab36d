"""Every `supervisor ...` command a hint, a docstring or a document names exists: a hint that
sends a user to a command that is not there is worse than none."""

from __future__ import annotations

import re
from pathlib import Path

import click

from supervisor.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
_NAMED = re.compile(r"`supervisor((?: [a-z][a-z0-9-]*)+)")


def _sources() -> list[Path]:
    code = [*(ROOT / "supervisor").rglob("*.py"), *(ROOT / "screens").rglob("*.py")]
    return [*code, ROOT / "README.md", *(ROOT / "docs").glob("*.md")]


def _missing(words: list[str]) -> str | None:
    """The first word that names no subcommand of the group before it, else None."""
    command: click.Command = cli
    for word in words:
        if not isinstance(command, click.Group):
            return None  # arguments of a command
        found = command.get_command(click.Context(command), word)
        if found is None:
            return word
        command = found
    return None


def test_every_named_command_exists() -> None:
    named, missing = 0, []
    for path in _sources():
        for match in _NAMED.finditer(path.read_text(encoding="utf-8")):
            named += 1
            word = _missing(match.group(1).split())
            if word is not None:
                missing.append(f"{path.relative_to(ROOT)}: {match.group(0)}` ({word!r})")
    assert named > 100, "the scan finds the commands hints name"
    assert missing == []


def test_the_scan_catches_a_command_that_does_not_exist() -> None:
    assert _missing(["list"]) == "list"
    assert _missing(["proposals", "purge"]) == "purge"
    assert _missing(["proposals", "approve", "ID"]) is None
