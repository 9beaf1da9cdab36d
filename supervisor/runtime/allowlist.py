"""The operator's resume allowlist: which import references a resume may import.

``supervisor resume`` re-creates an agent whose process is gone from what the ledger holds: a
factory reference (``MODULE:FACTORY``, recorded by ``supervisor run``) or the tools' import
references of a saved agent. The ledger is shared and may be written by anyone who can reach
it, so nothing it names is imported unless the operator listed it here, in a file the ledger
cannot change: one reference per line (``package.module:name`` or ``package.module:*``), ``#``
starts a comment. The file is ``SUPERVISOR_ALLOWLIST`` when set, else ``allowlist`` in the
user's config folder (``supervisor allowlist path``).

Naming a factory on the command line (``supervisor run MODULE:FACTORY``, the TUI's new-run
dialog) is the operator's review of it, so those commands add it here. The demo's own agents
(shipped in this package) are always allowed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

import platformdirs

from supervisor.errors import SupervisorError

#: References every resume may import: code shipped inside this package, never ledger text.
BUILTIN = ("supervisor.demo.agent:*",)

_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:(\*|[A-Za-z_][\w.]*)$")


class InvalidReference(SupervisorError, ValueError):
    """Not an import reference of the form ``package.module:name`` or ``package.module:*``."""

    code = "invalid_import_reference"


def allowlist_path() -> Path:
    """The operator's allowlist file (it need not exist)."""
    configured = os.environ.get("SUPERVISOR_ALLOWLIST")
    if configured:
        return Path(configured).expanduser()
    return Path(platformdirs.user_config_dir("agent-supervisor")) / "allowlist"


def check_reference(reference: str) -> str:
    """``reference`` stripped, or :class:`InvalidReference`."""
    stripped = reference.strip()
    if not _REFERENCE.match(stripped):
        raise InvalidReference(
            f"{reference!r} is not an import reference.",
            hint="Use package.module:name, or package.module:* for every name in a module.",
        )
    return stripped


def read_allowlist(path: Path | None = None) -> list[str]:
    """The references in the operator's file (no built-ins), in file order."""
    path = path or allowlist_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    references: list[str] = []
    for line in text.splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry and _REFERENCE.match(entry) and entry not in references:
            references.append(entry)
    return references


def effective_allowlist(extra: Iterable[str] = (), path: Path | None = None) -> frozenset[str]:
    """What a resume may import: the built-ins, the operator's file and ``extra``."""
    return frozenset([*BUILTIN, *read_allowlist(path), *(check_reference(e) for e in extra)])


def is_allowed(reference: str, allowlist: Iterable[str]) -> bool:
    """Listed exactly, or its module as ``module:*``."""
    entries = set(allowlist)
    module, _, _ = reference.partition(":")
    return reference in entries or f"{module}:*" in entries


def add_reference(reference: str, path: Path | None = None) -> bool:
    """Add ``reference`` to the operator's file; False when it was already allowed there."""
    reference = check_reference(reference)
    path = path or allowlist_path()
    if is_allowed(reference, read_allowlist(path)):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    with path.open("a", encoding="utf-8") as handle:
        if existing and not existing.endswith("\n"):
            handle.write("\n")
        handle.write(reference + "\n")
    return True


def remove_reference(reference: str, path: Path | None = None) -> bool:
    """Remove the exact line ``reference`` from the operator's file; False when absent."""
    reference = check_reference(reference)
    path = path or allowlist_path()
    if not path.exists():
        return False
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if line.split("#", 1)[0].strip() != reference]
    if len(kept) == len(lines):
        return False
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    return True
