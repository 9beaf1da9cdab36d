"""Entry point of the ``supervisor`` command.

Keep imports here light: ``supervisor --help`` must stay fast, so each command group lives in
its own module and is imported only when invoked (``LAZY_COMMANDS``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

from supervisor.errors import SupervisorError
from supervisor.version import __version__

#: name -> ("module:attribute", one-line help). Add a command group with one line here.
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "sandbox": ("supervisor.cli.sandbox:sandbox", "Run commands in the code sandbox."),
    "doctor": ("supervisor.cli.doctor:doctor", "Check sandbox isolation, Chromium and the ledger."),
    "proposals": (
        "supervisor.cli.proposals:proposals",
        "List, show, decide, edit and reconcile proposals.",
    ),
    "traces": ("supervisor.cli.traces:traces", "Tail, export and review tool traces."),
    "audit": ("supervisor.cli.audit:audit", "Verify the audit hash chain."),
    "policy": ("supervisor.cli.policy:policy", "Apply, show, diff and test the policy."),
    "grants": ("supervisor.cli.grants:grants", "Allow calls like an approved one; list, revoke."),
    "mcp-server": ("supervisor.cli.mcp_server:mcp_server", "Read-only ledger view over MCP."),
    "mcp-gateway": (
        "supervisor.cli.mcp_gateway:mcp_gateway",
        "Put any MCP server behind approval (stdio gateway); install it in a client.",
    ),
    "acp": ("supervisor.cli.acp:acp", "Relay an ACP agent; its permission requests are proposals."),
    "run": ("supervisor.cli.run:run", "Run MODULE:FACTORY as a supervised agent process."),
    "processes": (
        "supervisor.cli.processes:processes",
        "List supervised processes, show one with its log, stop one.",
    ),
    "resume": ("supervisor.cli.resume:resume", "Run a decided proposal whose agent is gone."),
    "notify": (
        "supervisor.cli.notify:notify",
        "Webhooks for proposals blocked on you: add, list, remove, test, deliveries, run.",
    ),
    "allowlist": ("supervisor.cli.resume:allowlist", "Import references a resume may import."),
    "operators": (
        "supervisor.cli.operators:operators",
        "Named operators who decide from the web: add, list, revoke.",
    ),
    "hook": (
        "supervisor.cli.hook:hook",
        "Put Claude Code behind the ledger: its hook, install, uninstall.",
    ),
    "serve": (
        "supervisor.cli.serve:serve",
        "Decide from a browser or phone: decision pages and the TUI over HTTP.",
    ),
    "feed-relay": (
        "supervisor.cli.feed_relay:feed_relay",
        "One change-feed connection for this host's processes (PostgreSQL).",
    ),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            module_name, _, attribute = LAZY_COMMANDS[cmd_name][0].partition(":")
            command = getattr(importlib.import_module(module_name), attribute)
            assert isinstance(command, click.Command)
            return command
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows: list[tuple[str, str]] = []
        for name in self.list_commands(ctx):
            if name in LAZY_COMMANDS:
                rows.append((name, LAZY_COMMANDS[name][1]))
                continue
            command = super().get_command(ctx, name)
            rows.append((name, command.get_short_help_str() if command else ""))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="supervisor")
@click.option(
    "--db", "db_url", metavar="URL", default=None, help="Ledger URL or SQLite path for the TUI."
)
@click.option(
    "--notify", metavar="CHANNELS", default=None,
    help="How the TUI says a run is blocked on you: bell,osc,desktop (default: all; "
    "SUPERVISOR_NOTIFY) or none.",
)  # fmt: skip
@click.pass_context
def cli(ctx: click.Context, db_url: str | None, notify: str | None) -> None:
    """Supervise AI agents: governed tools, durable approvals, live traces.

    Without a command, opens the supervisor TUI on the ledger (--db URL for another).
    """
    if ctx.invoked_subcommand is None:
        from supervisor.cli.tui import open_tui

        open_tui(db_url, notify=notify)


@cli.group()
def tools() -> None:
    """Inspect governed tools."""


@tools.command("show")
@click.argument("reference")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def tools_show(reference: str, as_json: bool) -> None:
    """Show a governed tool's schema, OpenAI form, policy and hash.

    REFERENCE is 'package.module:function'. Naming it here is the operator's review, so it is
    imported (this command never runs the tool).
    """
    from supervisor.cli.output import echo_json, echo_line
    from supervisor.services.rendering import dumps_visible
    from supervisor.tools.registry import ToolRegistry

    registry = ToolRegistry(allowlist=[reference])
    tool = registry.resolve(reference)
    report = {
        "name": tool.name,
        "import_ref": tool.import_ref,
        "schema_hash": tool.schema_hash,
        "policy": {
            "deterministic": tool.policy.deterministic,
            "side_effects": tool.policy.side_effects,
            "requires_approval": tool.policy.requires_approval,
            "approval_reason": tool.policy.approval_reason,
            "domains": list(tool.policy.domains),
            "cacheable": tool.policy.cacheable,
        },
        "parameters": tool.parameters,
        "openai": tool.openai.definition,
    }
    if as_json:
        echo_json(report)
        return
    echo_line(f"{tool.name}  ({tool.import_ref})")
    echo_line(f"schema hash  {tool.schema_hash}")
    echo_line(f"policy       {dumps_visible(report['policy'])}")
    echo_line(f"openai       strict={tool.openai.strict}")
    echo_json(tool.parameters)


@cli.command()
@click.option("--no-tui", is_flag=True, help="Follow along in this terminal instead of the TUI.")
@click.option("--auto-approve", is_flag=True, help="Approve every demo proposal (with --no-tui).")
@click.option("--home", type=click.Path(path_type=Path), help="Folder for the demo ledger.")
@click.option("--walkthrough", is_flag=True, help="Only print the governed-dispatch walk-through.")
@click.option(
    "--reset", is_flag=True,
    help="Start from an empty demo ledger (removes the demo's ledger and agent logs first).",
)  # fmt: skip
@click.option(
    "--approval-ttl", type=click.IntRange(1, 30 * 24 * 3600), default=3600, show_default=True,
    metavar="SECONDS", help="How long the agents' proposals stay decidable (then they expire).",
)  # fmt: skip
def demo(
    no_tui: bool,
    auto_approve: bool,
    home: Path | None,
    walkthrough: bool,
    reset: bool,
    approval_ttl: int,
) -> None:
    """Run demo agents against a scripted model and supervise them.

    The demo keeps its ledger between runs, so proposals left pending by one run are still
    there in the next; `--reset` starts from an empty one.
    """
    if walkthrough:
        from supervisor.demo.walkthrough import run_walkthrough

        run_walkthrough(click.echo)
        return
    from supervisor.cli.output import echo_line
    from supervisor.cli.tui import collection_paused

    with collection_paused():
        from supervisor.demo.run import TuiOpener, default_home, reset_home, run_demo

    home = home or default_home()
    if reset:
        removed = reset_home(home)
        echo_line(f"Reset the demo in {home}: removed {len(removed)} files.")
    tui, why_not = demo_in_tui(no_tui, auto_approve, sys.stdin.isatty() and sys.stdout.isatty())
    if why_not:
        echo_line(why_not)
    opener: TuiOpener | None = None
    if tui:
        from supervisor.cli.tui import open_tui, preload_tui  # where the demo imports Textual

        preload_tui()  # before the agents start and compete with it for the CPU
        opener = open_tui
    code = run_demo(
        home, tui=tui, auto_approve=auto_approve, echo=echo_line,
        open_tui=opener, approval_ttl=approval_ttl,
    )  # fmt: skip
    sys.exit(code)


def demo_in_tui(no_tui: bool, auto_approve: bool, terminal: bool) -> tuple[bool, str | None]:
    """Whether the demo opens the TUI, and why not when it was not told ``--no-tui``."""
    if no_tui:
        return False, None
    if auto_approve:
        return False, (
            "--auto-approve decides every proposal itself, so the demo follows along in this "
            "terminal instead of opening the TUI (drop --auto-approve to decide in the TUI)."
        )
    if not terminal:
        return False, (
            "Not a terminal, so the demo follows along here instead of opening the TUI; decide "
            "with `supervisor proposals approve ID` from another shell."
        )
    return True, None


def check_argv(argv: list[str]) -> None:
    """Refuse arguments that are not UTF-8 before any command runs.

    Python hands undecodable argv bytes over as lone surrogates; no id, name, path or URL in
    the ledger can contain them, and storing or printing them would fail half-way.

    Raises:
        ArgumentNotText: The first argument that is not valid UTF-8 text.
    """
    for position, argument in enumerate(argv, start=1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            from supervisor.cli.errors import ArgumentNotText

            try:
                shown = repr(argument.encode("utf-8", "surrogateescape"))  # the bytes given
            except UnicodeEncodeError:
                shown = ascii(argument)
            raise ArgumentNotText(position, shown) from None


def echo_usage_error(error: click.UsageError) -> None:
    """A bad option or argument as one typed line (``error [invalid_usage]: ...``) plus a hint
    naming the command's ``--help``, like every other typed error."""
    from supervisor.cli.output import echo_line

    command = error.ctx.command_path if error.ctx is not None else "supervisor"
    echo_line(f"error [invalid_usage]: {error.format_message()}", err=True)
    echo_line(f"  Run `{command} --help` for its options and arguments.", err=True)


def main() -> None:
    """Console-script entry: typed errors become one clear line and exit code 2."""
    try:
        check_argv(sys.argv[1:])
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:  # a group without its subcommand
        exc.show()
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        echo_usage_error(exc)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except SupervisorError as exc:
        from supervisor.cli.output import echo_error

        echo_error(exc)
        sys.exit(2)
