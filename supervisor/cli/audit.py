"""``supervisor audit verify``: recompute the audit hash chain."""

from __future__ import annotations

import json
import sys

import click

from supervisor.cli.proposals import db_option, open_ledger


@click.group()
def audit() -> None:
    """Check the append-only audit log."""


@audit.command("verify")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@db_option
def verify(as_json: bool, db_url: str | None) -> None:
    """Recompute the hash chain; exit 1 naming the first broken seq on failure."""
    with open_ledger(db_url, read_only=True) as ledger:
        report = ledger.verify()
        head = ledger.head()
    if as_json:
        click.echo(json.dumps({**report.model_dump(), "head": head}, indent=2))
    elif report.ok:
        click.echo(f"audit chain ok: {report.checked} records, head seq {head}")
    else:
        click.echo(
            f"audit chain BROKEN at seq {report.first_broken_seq}: {report.reason} "
            f"({report.checked} records checked)",
            err=True,
        )
    if not report.ok:
        sys.exit(1)
