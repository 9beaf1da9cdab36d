"""Install and uninstall the supervisor's hooks entry in Claude Code's ``settings.json``.

The entry uses Claude Code's documented settings format: under ``hooks``, one matcher group per
event holding one command hook::

    {"hooks": {
      "PreToolUse":  [{"matcher": MATCHER, "hooks": [{"type": "command", "timeout": 600,
                       "command": "/path/to/supervisor hook claude-code --timeout 600"}]}],
      "PostToolUse": [{"matcher": MATCHER, "hooks": [{"type": "command", "timeout": 60,
                       "command": "/path/to/supervisor hook claude-code --timeout 60"}]}],
      "PostToolUseFailure": [... the same as PostToolUse ...]}}

Installing merges into what is there (other keys, other events, other hooks of the same event
stay as they were) and replaces an earlier supervisor entry instead of adding a second one;
uninstalling removes exactly the supervisor's hooks, and the groups, event lists and ``hooks``
object that only held them. The file is written back in its own indentation, so a round trip
leaves a settings file written as Claude Code writes it (``json`` with an indent) byte-identical.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from supervisor.errors import SupervisorError

Scope = Literal["project", "user"]

#: What marks a hook command as the supervisor's.
MARKER = "hook claude-code"
#: Claude Code's own default command-hook timeout, in seconds.
DEFAULT_TIMEOUT = 600
#: The PostToolUse hook only records a result.
OUTCOME_TIMEOUT = 60
#: The tools gated by default: those that change files, run commands or reach the network
#: (MCP tools included). ``--matcher '*'`` gates every tool; see the docs for a policy that
#: allows the read-only ones.
DEFAULT_MATCHER = "Bash|Edit|MultiEdit|Write|NotebookEdit|WebFetch|WebSearch|mcp__.*"
#: The events the entry hooks, and whether the hook blocks on a decision there.
EVENTS: dict[str, bool] = {"PreToolUse": True, "PostToolUse": False, "PostToolUseFailure": False}


class SettingsInvalid(SupervisorError, ValueError):
    """Claude Code's settings file cannot be read as a settings object; it was left as is."""

    code = "claude_code_settings_invalid"


@dataclass(frozen=True)
class SettingsChange:
    """What an install or uninstall did: the file and whether its content changed."""

    path: Path
    changed: bool


def settings_path(scope: Scope, *, project_dir: Path | None = None) -> Path:
    """``<project>/.claude/settings.json`` or ``~/.claude/settings.json``."""
    if scope == "user":
        return Path(os.path.expanduser("~")) / ".claude" / "settings.json"
    return (project_dir or Path.cwd()) / ".claude" / "settings.json"


def supervisor_command() -> str:
    """The absolute ``supervisor`` executable (Claude Code's PATH may not have it)."""
    beside = Path(sys.executable).parent / "supervisor"
    if beside.is_file():
        return str(beside)
    found = shutil.which("supervisor")
    return str(Path(found).resolve()) if found else "supervisor"


def hook_command(timeout: int, db_url: str | None, executable: str | None = None) -> str:
    """The shell command of the hook (Claude Code runs it through a shell)."""
    words = [executable or supervisor_command(), "hook", "claude-code", "--timeout", str(timeout)]
    if db_url:
        words += ["--db", db_url]
    return shlex.join(words)


def is_ours(hook: Any) -> bool:
    """Whether a hook object is the supervisor's."""
    return (
        isinstance(hook, dict)
        and hook.get("type") == "command"
        and isinstance(hook.get("command"), str)
        and MARKER in hook["command"]
    )


def _read(path: Path) -> tuple[dict[str, Any], str | None]:
    """The settings object and the file's text (``None`` when there is no file)."""
    if not path.exists():
        return {}, None
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if text.strip() else {}
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise SettingsInvalid(
            f"Cannot read {path} as JSON: {error}.", hint="Fix or move the file, then retry."
        ) from None
    if not isinstance(data, dict):
        raise SettingsInvalid(f"{path} does not hold a JSON object.", hint="Fix it, then retry.")
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise SettingsInvalid(f"'hooks' in {path} is not an object.", hint="Fix it, then retry.")
    return data, text


def _indent(text: str | None) -> int | None:
    """The indentation the file uses (2 by default, ``None`` for one-line JSON)."""
    if text is None:
        return 2
    lines = text.splitlines()
    if len(lines) < 2:
        return None if text.strip() else 2
    second = lines[1]
    return (len(second) - len(second.lstrip(" "))) or 2


def _write(path: Path, data: dict[str, Any], text: str | None) -> bool:
    indent = _indent(text)
    rendered = json.dumps(data, indent=indent, ensure_ascii=False)
    if text is None or text.endswith("\n"):
        rendered += "\n"
    if rendered == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".supervisor-tmp")
    temporary.write_text(rendered, encoding="utf-8")
    temporary.replace(path)
    return True


def _without_ours(groups: list[Any]) -> list[Any]:
    """The event's matcher groups with the supervisor's hooks taken out (emptied groups go)."""
    kept: list[Any] = []
    for group in groups:
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            kept.append(group)
            continue
        hooks = [hook for hook in group["hooks"] if not is_ours(hook)]
        if len(hooks) == len(group["hooks"]):
            kept.append(group)
        elif hooks:
            kept.append({**group, "hooks": hooks})
    return kept


def install(
    path: Path,
    *,
    timeout: int = DEFAULT_TIMEOUT,
    matcher: str = DEFAULT_MATCHER,
    db_url: str | None = None,
    executable: str | None = None,
) -> SettingsChange:
    """Write the supervisor's hooks entry into the settings file at ``path`` (idempotent).

    Raises:
        SettingsInvalid: The file is not a JSON object (nothing is written).
    """
    data, text = _read(path)
    hooks: dict[str, Any] = data.setdefault("hooks", {})
    for event, blocking in EVENTS.items():
        seconds = timeout if blocking else OUTCOME_TIMEOUT
        ours = {
            "type": "command",
            "command": hook_command(seconds, db_url, executable),
            "timeout": seconds,
        }
        groups = hooks.get(event)
        groups = _without_ours(groups) if isinstance(groups, list) else []
        groups.append({"matcher": matcher, "hooks": [ours]})
        hooks[event] = groups
    return SettingsChange(path, _write(path, data, text))


def uninstall(path: Path) -> SettingsChange:
    """Remove the supervisor's hooks (and only them) from the settings file at ``path``.

    Raises:
        SettingsInvalid: The file is not a JSON object (nothing is written).
    """
    data, text = _read(path)
    hooks = data.get("hooks")
    if text is None or not isinstance(hooks, dict):
        return SettingsChange(path, False)
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = _without_ours(groups)
        if len(kept) != len(groups) or kept != groups:
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if not hooks:
        del data["hooks"]
    return SettingsChange(path, _write(path, data, text))
