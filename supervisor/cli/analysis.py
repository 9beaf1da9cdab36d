"""The trace analyzer's command, ``supervisor traces analyze``, and the ``--since`` parser that
it shares with ``traces export`` and ``traces push``.
"""

from __future__ import annotations

from datetime import datetime

import click

from supervisor.cli.output import echo_json
from supervisor.cli.proposals import db_option, open_ledger


def since_option(text: str | None) -> datetime | None:
    """``--since`` as a time, or a usage error naming the option."""
    if text is None:
        return None
    from supervisor.analysis.analyzer import parse_since

    try:
        return parse_since(text)
    except ValueError as error:  # its message names the value and what was wrong
        raise click.BadParameter(f"{error}.", param_hint="--since") from None


@click.command("analyze")
@click.option("--since", default=None, help="ISO-8601 time or a duration (30m, 2h, 7d).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@db_option
def analyze(since: str | None, as_json: bool, db_url: str | None) -> None:
    """Per-tool outcome counts and usable rate, fallback and degraded rates, provider error
    codes, approval latency p50/p95, expired and rejected counts, top reason codes."""
    from supervisor.analysis.analyzer import analyze as run_analysis
    from supervisor.analysis.analyzer import format_stats

    start = since_option(since)
    with open_ledger(db_url, read_only=True) as ledger:
        stats = run_analysis(ledger, since=start)
    if as_json:
        echo_json(stats.to_json())
    else:
        click.echo(format_stats(stats))
