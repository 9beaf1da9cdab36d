"""Entry point of the ``supervisor`` command.

Keep imports here light: ``supervisor --help`` must stay fast, so each command imports what it
needs inside its own function.
"""

from __future__ import annotations

import json
import sys

import click

from supervisor import __version__
from supervisor.errors import SupervisorError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="supervisor")
def cli() -> None:
    """Supervise AI agents: governed tools, durable approvals, live traces."""


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
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return
    click.echo(f"{tool.name}  ({tool.import_ref})")
    click.echo(f"schema hash  {tool.schema_hash}")
    click.echo(f"policy       {json.dumps(report['policy'], ensure_ascii=False)}")
    click.echo(f"openai       strict={tool.openai.strict}")
    click.echo(json.dumps(tool.parameters, indent=2, ensure_ascii=False))


@cli.command()
def demo() -> None:
    """Walk through governed dispatch with the seed's example tools."""
    from supervisor.demo.walkthrough import run_walkthrough

    run_walkthrough(click.echo)


def main() -> None:
    """Console-script entry: typed errors become one clear line and exit code 2."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except SupervisorError as exc:
        hint = f"\n  {exc.hint}" if exc.hint else ""
        click.echo(f"error [{exc.code}]: {exc.message}{hint}", err=True)
        sys.exit(2)
