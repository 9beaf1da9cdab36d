"""``supervisor mcp-server``: serve the read-only ledger view over MCP (stdio)."""

from __future__ import annotations

import click

from supervisor.cli.proposals import db_option, open_ledger


@click.command("mcp-server")
@db_option
@click.option(
    "--show-values",
    is_flag=True,
    help="Show proposal argument values after best-effort secret redaction (default: keys "
    "and sizes only).",
)
def mcp_server(db_url: str | None, show_values: bool) -> None:
    """Serve pending proposals, outcome evidence and trace statistics over MCP (stdio).

    Read-only, with no approve tool on purpose: approval belongs to a human in a trusted host.
    Proposal arguments are shown as keys and sizes unless --show-values is given.
    """
    from supervisor.mcp.server import build_server

    with open_ledger(db_url, read_only=True) as ledger:
        build_server(ledger, show_values=show_values).run("stdio")
