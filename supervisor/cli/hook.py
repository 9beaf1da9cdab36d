"""``supervisor hook``: put Claude Code behind the ledger.

``supervisor hook claude-code`` is the command hook Claude Code runs (one event on stdin, the
answer on stdout); ``supervisor hook install claude-code`` and ``uninstall claude-code`` write
and remove its entry in Claude Code's settings. See docs/integrations/claude-code.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NoReturn

import click

if TYPE_CHECKING:
    from supervisor.claude_code.events import HookEvent
    from supervisor.ledger.service import ApprovalLedger

#: Seconds kept back from the hook's timeout so the answer is written before Claude Code
#: kills the hook.
TIMEOUT_MARGIN = 5.0


_DB = click.option(
    "--db", "db_url", metavar="URL", default=None,
    help="Ledger URL or SQLite path (default: SUPERVISOR_DB or the user's ledger).",
)  # fmt: skip


@contextmanager
def _ledger(db_url: str | None) -> Iterator[ApprovalLedger]:
    """The ledger the hook answers from (created on first use, like an agent run's).

    Imports only the store: the hook runs once per tool call, so it skips the CLI's views.
    """
    from supervisor.store.provider import SQLModelProvider
    from supervisor.store.urls import to_ledger_url

    with SQLModelProvider(to_ledger_url(db_url) if db_url is not None else None) as provider:
        yield provider.ledger


class HookStopped(BaseException):
    """SIGTERM or SIGINT reached the waiting hook (a BaseException: nothing swallows it)."""


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM/SIGINT into :class:`HookStopped` for the block, so a stopped wait cancels
    its proposal and answers deny instead of dying silently."""
    import signal
    from types import FrameType

    def stop(signum: int, frame: FrameType | None) -> None:
        raise HookStopped(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@click.group()
def hook() -> None:
    """Gate another agent runtime's tool calls through the ledger (Claude Code)."""


@hook.command("claude-code")
@click.option(
    "--timeout", type=click.IntRange(1, 24 * 3600), default=600, show_default=True,
    metavar="SECONDS", help="The hook's timeout in Claude Code's settings; the wait for a "
    "decision ends 5 s (or 10%) before it.",
)  # fmt: skip
@_DB
def claude_code(timeout: int, db_url: str | None) -> None:
    """Answer one Claude Code hook event read from stdin (PreToolUse, PermissionRequest,
    PostToolUse, PostToolUseFailure).

    A tool call is proposed through the ledger; the policy or a person decides it and the
    answer is Claude Code's hook JSON on stdout. Any error denies: its message goes to stderr
    and the exit code is 2, which blocks the call.
    """
    from supervisor.claude_code.events import HookInputInvalid, parse_event

    raw = sys.stdin.buffer.read()
    try:
        event = parse_event(raw)
    except HookInputInvalid as error:
        _blocked(f"{error.message} {error.hint or ''}".strip())
    if event.hook_event_name in ("PostToolUse", "PostToolUseFailure"):
        _record(event, db_url)
        return
    wait = max(0.0, min(timeout - TIMEOUT_MARGIN, timeout * 0.9))
    _answer(event, db_url, wait)


def _blocked(message: str) -> NoReturn:
    """Fail closed: say why on stderr and exit 2 (Claude Code blocks the call)."""
    from supervisor.claude_code.answers import BLOCKING_EXIT_CODE

    click.echo(f"supervisor hook: {message} The call was blocked.", err=True)
    sys.exit(BLOCKING_EXIT_CODE)


def _answer(event: HookEvent, db_url: str | None, wait_seconds: float) -> None:
    from functools import partial

    from supervisor.claude_code.answers import Answer, Deny, hook_output
    from supervisor.claude_code.gate import gate, supervised_wait

    answer: Answer
    try:
        with _stop_on_signals():
            try:
                with _ledger(db_url) as ledger:
                    answer = gate(
                        ledger, event, wait_seconds=wait_seconds,
                        waiting=partial(supervised_wait, ledger, event),
                    )  # fmt: skip
            except HookStopped as stopped:
                answer = Deny(
                    f"The supervisor's hook was stopped ({stopped}); the call did not run."
                )
    except Exception as error:  # fail closed: nothing but a decided approval allows
        code = getattr(error, "code", type(error).__name__)
        _blocked(f"error [{code}]: {error}")
    click.echo(json.dumps(hook_output(event.hook_event_name, answer), ensure_ascii=False))


def _record(event: HookEvent, db_url: str | None) -> None:
    from supervisor.claude_code.gate import record_outcome

    try:
        with _ledger(db_url) as ledger:
            record_outcome(ledger, event)
    except Exception as error:  # the tool already ran: report, never block the session
        code = getattr(error, "code", type(error).__name__)
        click.echo(f"supervisor hook: could not record the outcome [{code}]: {error}", err=True)
        sys.exit(1)


def _scope(project: bool, user: bool) -> Literal["project", "user"]:
    if project and user:
        raise click.UsageError("Give --project or --user, not both.")
    return "user" if user else "project"


@hook.group("install")
def install() -> None:
    """Write a runtime's hooks entry into its settings."""


@hook.group("uninstall")
def uninstall() -> None:
    """Remove a runtime's hooks entry from its settings (and nothing else)."""


_PROJECT = click.option(
    "--project", is_flag=True, help="This project's .claude/settings.json (the default)."
)
_USER = click.option("--user", is_flag=True, help="Your ~/.claude/settings.json.")
_DIR = click.option(
    "--project-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="The project folder (default: the current one).",
)  # fmt: skip


@install.command("claude-code")
@_PROJECT
@_USER
@_DIR
@click.option(
    "--timeout", type=click.IntRange(10, 24 * 3600), default=600, show_default=True,
    metavar="SECONDS", help="How long Claude Code lets the hook wait for a decision.",
)  # fmt: skip
@click.option(
    "--matcher", default=None, metavar="REGEX",
    help="Which tools are gated (Claude Code's matcher; '*' for all). Default: Bash, Edit, "
    "MultiEdit, Write, NotebookEdit, WebFetch, WebSearch and MCP tools.",
)  # fmt: skip
@click.option(
    "--db", "db_url", metavar="URL", default=None,
    help="Pin the hook to this ledger (default: SUPERVISOR_DB or the user's ledger when the "
    "hook runs).",
)  # fmt: skip
def install_claude_code(
    project: bool, user: bool, project_dir: Path | None, timeout: int, matcher: str | None,
    db_url: str | None,
) -> None:  # fmt: skip
    """Install the supervisor's PreToolUse and PostToolUse hooks for Claude Code."""
    from supervisor.claude_code.settings import DEFAULT_MATCHER, settings_path
    from supervisor.claude_code.settings import install as install_hooks
    from supervisor.cli.output import echo_line

    path = settings_path(_scope(project, user), project_dir=project_dir)
    change = install_hooks(path, timeout=timeout, matcher=matcher or DEFAULT_MATCHER, db_url=db_url)
    verb = "Installed the supervisor's hooks in" if change.changed else "Already installed in"
    echo_line(f"{verb} {path}")


@uninstall.command("claude-code")
@_PROJECT
@_USER
@_DIR
def uninstall_claude_code(project: bool, user: bool, project_dir: Path | None) -> None:
    """Remove the supervisor's Claude Code hooks, leaving the rest of the settings as is."""
    from supervisor.claude_code.settings import settings_path
    from supervisor.claude_code.settings import uninstall as uninstall_hooks
    from supervisor.cli.output import echo_line

    path = settings_path(_scope(project, user), project_dir=project_dir)
    change = uninstall_hooks(path)
    verb = "Removed the supervisor's hooks from" if change.changed else "No supervisor hooks in"
    echo_line(f"{verb} {path}")
