"""``supervisor mcp-gateway``: put any MCP server behind the durable mutation gate.

supervisor mcp-gateway [--name NAME] -- <server command...>   (stdio upstream)
supervisor mcp-gateway [--name NAME] --url URL                (streamable HTTP upstream)
supervisor mcp-gateway install CLIENT [--write] ...           (client configuration)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

import click

from supervisor.cli.proposals import db_option, ledger_url, open_ledger
from supervisor.mcp.client_config import CLIENTS

_INSTALL = "install"
_NOT_NAME = re.compile(r"[^A-Za-z0-9-]+")
_LAUNCHERS = {"python", "python3", "node", "npx", "uvx", "uv", "bunx", "deno", "pipx", "sh", "bash"}


def default_name(command: tuple[str, ...], url: str | None) -> str:
    """A server name from the command (its script or package) or the URL's host."""
    if url is not None:
        raw = urlsplit(url).hostname or "http"
    else:
        words = [Path(word).stem for word in command if not word.startswith("-")]
        raw = next((word for word in words if word.lower() not in _LAUNCHERS), None) or (
            words[0] if words else "server"
        )
        raw = raw.rsplit("/", 1)[-1].split("@")[0] or "server"
    name = _NOT_NAME.sub("-", raw).strip("-")[:32] or "server"
    return name if name[0].isalnum() else f"s{name}"[:32]


def _after_dashes(command: tuple[str, ...]) -> tuple[str, ...]:
    """The server command without the ``--`` that separates it (click keeps it after a
    positional argument)."""
    return command[1:] if command[:1] == ("--",) else command


def _supervisor_executable() -> str:
    """The ``supervisor`` program to write into a client's configuration (an absolute path
    when it can be found: desktop clients do not read the shell's PATH)."""
    found = shutil.which("supervisor")
    if found:
        return str(Path(found).resolve())
    argv0 = Path(sys.argv[0])
    return str(argv0.resolve()) if argv0.name == "supervisor" and argv0.exists() else "supervisor"


@click.command(
    "mcp-gateway",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--name", default=None, help="Server name (proposals show NAME__TOOL; "
              "runtime mcp:NAME). Default: from the command or URL.")  # fmt: skip
@click.option("--url", default=None, help="Streamable HTTP upstream instead of a command.")
@click.option("--trust", type=click.Choice(["untrusted", "trusted"]), default="untrusted",
              show_default=True, help="trusted: tools annotated readOnlyHint run without "
              "approval (the policy permitting); untrusted: every call is asked.")  # fmt: skip
@db_option
@click.option("--ttl", "ttl_seconds", type=float, default=None,
              help="Seconds a proposal waits for a decision (default: the ledger's).")  # fmt: skip
@click.option("--replay-window", "replay_window", type=float, default=600.0, show_default=True,
              help="Seconds after a call ran during which an identical call gets its recorded "
              "result instead of running again (0: propose again).")  # fmt: skip
@click.option("--progress-every", type=float, default=5.0, show_default=True,
              help="Seconds between progress notifications while a call waits.")  # fmt: skip
@click.option("--block-seconds", type=click.FloatRange(min=0.0), default=10.0, show_default=True,
              help="Seconds a call waits in one request before a 2026-07-28 client that answers "
              "form elicitation gets input_required (re-sent with its state); inf: always "
              "block.")  # fmt: skip
@click.option("--decision-base-url", envvar="SUPERVISOR_PUBLIC_URL", default=None,
              help="Base URL of `supervisor serve`, named in the input_required form "
              "(default: $SUPERVISOR_PUBLIC_URL).")  # fmt: skip
@click.option("--timeout", "timeout_seconds", type=float, default=120.0, show_default=True,
              help="Seconds one upstream request may take.")  # fmt: skip
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def mcp_gateway(
    ctx: click.Context, name: str | None, url: str | None, trust: str, db_url: str | None,
    ttl_seconds: float | None, replay_window: float, progress_every: float,
    block_seconds: float, decision_base_url: str | None, timeout_seconds: float,
    command: tuple[str, ...],
) -> None:  # fmt: skip
    """Serve an MCP server's tools over stdio with mutations gated by approval.

    Give the server's command after -- (stdio) or --url (streamable HTTP). Read-only tools of
    a trusted server pass through; every other call becomes a proposal that runs once after a
    human approves it (`supervisor proposals approve ID`). `mcp-gateway install CLIENT`
    prints the client configuration that launches the gateway.
    """
    if command and command[0] == _INSTALL and url is None:
        sub = install.make_context(f"{ctx.command_path} {_INSTALL}", list(command[1:]), parent=ctx)
        with sub:
            install.invoke(sub)
        return
    command = _after_dashes(command)
    if (url is None) == (not command):
        raise click.UsageError("give the server's command after -- or --url URL (one of them)")
    from supervisor.mcp.config import McpServerConfig
    from supervisor.mcp.gateway_server import run_gateway

    config = McpServerConfig(
        name=name or default_name(command, url),
        command=tuple(command) if command else None,
        url=url,
        trust=trust,
        env=dict(os.environ) if command else {},
        timeout_seconds=timeout_seconds,
    )
    shown = " ".join(["supervisor mcp-gateway", f"--name {config.name}",
                      *(["--url", url] if url else ["--", *command])])  # fmt: skip
    with open_ledger(db_url) as ledger:
        code = run_gateway(
            ledger, config, command_line=shown[:2000], replay_window_seconds=replay_window,
            ttl_seconds=ttl_seconds, progress_every=progress_every, block_seconds=block_seconds,
            decision_base_url=decision_base_url or None,
        )  # fmt: skip
    ctx.exit(code)


@click.command(_INSTALL)
@click.argument("client", type=click.Choice(CLIENTS))
@click.option("--name", default=None, help="Entry name (default: from the command or URL).")
@click.option("--url", default=None, help="Streamable HTTP upstream instead of a command.")
@click.option("--trust", type=click.Choice(["untrusted", "trusted"]), default="untrusted",
              show_default=True, help="Passed on to the gateway.")  # fmt: skip
@db_option
@click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE",
              help="Environment for the server (repeatable).")  # fmt: skip
@click.option("--write", is_flag=True, help="Merge the entry into the client's file.")
@click.option("--path", "path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The client's file (default: where the client reads it).")  # fmt: skip
@click.option("--force", is_flag=True, help="With --write: replace an entry of the same name.")
@click.option("--executable", default=None,
              help="The supervisor program to launch (default: this one, absolute).")  # fmt: skip
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def install(
    client: str, name: str | None, url: str | None, trust: str, db_url: str | None,
    env_pairs: tuple[str, ...], write: bool, path: Path | None, force: bool,
    executable: str | None, command: tuple[str, ...],
) -> None:  # fmt: skip
    """Print (or with --write, merge) CLIENT's configuration for a gated server.

    CLIENT is claude-desktop, claude-code, cursor or vscode. Give the server's command after
    -- or --url. Other entries of the client's file are left as they were.
    """
    from supervisor.mcp.client_config import (
        client_entry,
        default_path,
        gateway_args,
        merge_entry,
        snippet,
    )

    command = _after_dashes(command)
    if (url is None) == (not command):
        raise click.UsageError("give the server's command after -- or --url URL (one of them)")
    env: dict[str, str] = {}
    for pair in env_pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise click.UsageError(f"--env takes KEY=VALUE, not {pair!r}")
        env[key] = value
    entry_name = name or default_name(command, url)
    db = ledger_url(db_url) if db_url else None
    args = gateway_args(entry_name, command=command, url=url, trust=trust, db_url=db)
    kind = next(known for known in CLIENTS if known == client)  # a checked Choice
    entry = client_entry(kind, executable or _supervisor_executable(), args, env)
    if not write:
        click.echo(json.dumps(snippet(kind, entry_name, entry), indent=2))
        return
    target = path or default_path(kind)
    done = merge_entry(target, kind, entry_name, entry, force=force)
    click.echo(f"{done} {entry_name!r} in {target}")
