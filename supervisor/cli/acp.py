"""``supervisor acp -- AGENT...``: an ACP agent whose permission requests go to the ledger.

The ACP SDK is imported inside the command only, so ``supervisor --help`` never loads it.
Standard output is the protocol stream in relay mode: everything this command says goes to
standard error.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from supervisor.cli.output import echo_line

if TYPE_CHECKING:
    from supervisor.acp.gate import AcpGate

#: Launchers whose first plain argument, not themselves, names the agent.
LAUNCHERS = frozenset({
    "python", "python3", "node", "npx", "bunx", "bun", "deno", "uv", "uvx", "pnpm", "pipx",
    "env", "run",
})  # fmt: skip

T = TypeVar("T")


def agent_name(argv: list[str]) -> str:
    """A short name for the agent from its command: ``acp_agent`` for
    ``python tests/support/acp_agent.py``, ``claude-code-acp`` for
    ``npx @zed-industries/claude-code-acp``."""
    for part in argv:
        name = Path(part).name
        stem = name.rsplit(".", 1)[0] if name.endswith((".py", ".js", ".mjs", ".ts")) else name
        base = stem.split("@")[0] if not stem.startswith("@") else stem
        if part.startswith("-") or "=" in part or not base:
            continue
        if base.rstrip("0123456789.") in LAUNCHERS:
            continue
        return base[:100]
    return Path(argv[0]).name[:100] or "agent"


def _err(line: str) -> None:
    echo_line(line, err=True)


def _write_out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


async def _until_signalled(work: Awaitable[T]) -> T:
    """Run ``work``; SIGTERM or SIGINT cancels it (so its cleanup runs) instead of killing."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, task.cancel)
    try:
        return await task
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


@click.command("acp", context_settings={"ignore_unknown_options": True})
@click.argument("agent_argv", nargs=-1, required=True, type=click.UNPROCESSED,
                metavar="-- AGENT [ARGS]...")  # fmt: skip
@click.option("--prompt", default=None, help="Be the client: send this one prompt and exit.")
@click.option(
    "--cwd", "cwd", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="The session's working directory with --prompt (default: this one).",
)  # fmt: skip
@click.option("--name", default=None, help="The agent's name (runtime acp:NAME); default: "
              "from its command.")  # fmt: skip
@click.option(
    "--db", "db_url", metavar="URL", default=None, help="Ledger URL or SQLite path (SUPERVISOR_DB)."
)
@click.option(
    "--decision-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
    metavar="SECONDS", help="Withdraw a request nobody decided in this time (default: at expiry).",
)  # fmt: skip
def acp(
    agent_argv: tuple[str, ...],
    prompt: str | None,
    cwd: Path | None,
    name: str | None,
    db_url: str | None,
    decision_timeout: float | None,
) -> None:
    """Put an ACP agent behind the supervisor.

    An editor launches `supervisor acp -- my-agent --flags` instead of the agent: every message
    passes through unchanged, except the agent's session/request_permission, which becomes a
    proposal decided in the TUI, the CLI or the web (or by a policy rule) and is answered with
    the agent's own option. With --prompt, this command is the client (one prompt, message
    text on stdout, exit 0 on end_turn).
    """
    from supervisor.acp.errors import AgentNotStarted
    from supervisor.acp.gate import AcpGate
    from supervisor.cli.proposals import open_ledger
    from supervisor.runtime.host import register_process

    argv = list(agent_argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise click.UsageError("Name the agent's command after --.")
    label = name or agent_name(argv)
    command = shlex.join(["supervisor", "acp", *(["--prompt", prompt] if prompt else []),
                          "--", *argv])  # fmt: skip
    env = dict(os.environ)
    with open_ledger(db_url) as ledger:
        process = register_process(ledger, command, f"acp-{uuid.uuid4().hex[:12]}", kind="acp")
        gate = AcpGate(
            ledger, label, process_id=process.process_id, decision_timeout=decision_timeout,
            echo=_err,
        )  # fmt: skip
        _err(f"[acp] process {process.process_id}: {gate.runtime} ({shlex.join(argv)})")
        status, exit_code = "exited", 1
        try:
            with process.heartbeats():
                if prompt is None:
                    exit_code = _relay(gate, argv, env)
                else:
                    exit_code = _headless(gate, argv, env, prompt, cwd)
        except asyncio.CancelledError:
            status, exit_code = "stopped", 128 + signal.SIGTERM
            _err("[acp] stopped by a signal")
        except OSError as error:
            raise AgentNotStarted(
                f"Cannot start the agent {argv[0]!r}: {error.strerror or error}.",
                hint="Check the command after -- (its path, that it is executable).",
            ) from error
        finally:
            process.set_status(status, exit_code)
    sys.exit(exit_code)


def _run(work: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await _until_signalled(work())

    return asyncio.run(main())


def _relay(gate: AcpGate, argv: list[str], env: dict[str, str]) -> int:
    from supervisor.acp.relay import run_relay

    return _run(lambda: run_relay(gate, argv, env))


def _headless(
    gate: AcpGate, argv: list[str], env: dict[str, str], prompt: str, cwd: Path | None
) -> int:
    from acp import RequestError

    from supervisor.acp.errors import AgentFailed
    from supervisor.acp.headless import STOP_EXIT_CODES, run_headless

    folder = str((cwd or Path.cwd()).resolve())
    try:
        stop_reason = _run(
            lambda: run_headless(gate, argv, env, prompt=prompt, cwd=folder, write=_write_out)
        )
    except (RequestError, ConnectionError, EOFError) as error:
        raise AgentFailed(
            f"The agent stopped answering or refused a request: {error}.",
            hint="Its own messages are on standard error above.",
        ) from error
    _err(f"[acp] stop reason: {stop_reason}")
    return STOP_EXIT_CODES.get(stop_reason, 1)
