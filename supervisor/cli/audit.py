"""``supervisor audit``: verify the audit chain against the ledger, and print its head.

Exit codes: 0 ok, 1 verification failed, 2 usage or ledger errors (one line, no traceback).
"""

from __future__ import annotations

import json
import sys

import click

from supervisor.cli.output import echo_line
from supervisor.cli.proposals import db_option, open_ledger
from supervisor.ledger.verify import DEFAULT_MAX_FINDINGS, Anchor, LedgerReport


@click.group()
def audit() -> None:
    """Check the append-only audit log."""


def _echo_report(report: LedgerReport) -> None:
    """The human form: the chain, the rows, the anchor; failures on stderr."""
    head = report.head
    if report.chain_ok:
        click.echo(f"audit chain ok: {report.checked} records, head seq {head.seq}")
    else:
        click.echo(
            f"audit chain BROKEN at seq {report.first_broken_seq}: {report.reason} "
            f"({report.checked} records checked)",
            err=True,
        )
    if report.mismatch_count == 0:
        click.echo(f"ledger rows ok: {report.proposals_checked} proposals explained by the chain")
    else:
        shown = len(report.mismatches)
        click.echo(
            f"ledger rows NOT explained by the audit chain: {report.mismatch_count} finding(s) "
            f"in {report.proposals_checked} proposals (first {shown} below)",
            err=True,
        )
        if head.seq == 0:
            click.echo("  the ledger holds proposals but no audit records", err=True)
        for finding in report.mismatches:
            said = f"chain {finding.chain or '-'}, row {finding.row or '-'}"
            echo_line(
                f"  {finding.proposal_id} {finding.check}: {finding.detail} ({said})", err=True
            )
    check = report.anchor
    if check is None:
        return
    if check.ok:
        click.echo(
            f"anchor ok: seq {check.found_seq} still hashes to {check.hash[:12]}; "
            f"{check.records_after} record(s) after it are not covered by the anchor"
        )
    else:
        click.echo(f"anchor FAILED: {check.reason}", err=True)


@audit.command("verify")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@click.option(
    "--anchor",
    metavar="HASH",
    default=None,
    help="A head printed earlier by `supervisor audit head` (HASH or SEQ:HASH); "
    "fail unless the chain still holds it.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_FINDINGS,
    show_default=True,
    help="Findings listed (all are counted).",
)
@db_option
def verify(as_json: bool, anchor: str | None, limit: int, db_url: str | None) -> None:
    """Recompute the hash chain and replay it against every proposal and execution.

    Exits 1 naming the first broken seq, each row the chain does not explain, or a lost anchor.
    """
    parsed = Anchor.parse(anchor) if anchor is not None else None
    with open_ledger(db_url, read_only=True) as ledger:
        report = ledger.verify(parsed, max_findings=limit)
    if as_json:
        document = {**report.model_dump(mode="json"), "head": report.head.seq,
                    "head_hash": report.head.hash}  # fmt: skip
        click.echo(json.dumps(document, indent=2))
    else:
        _echo_report(report)
    if not report.ok:
        sys.exit(1)


@audit.command("head")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@db_option
def head(as_json: bool, db_url: str | None) -> None:
    """Print the chain head (seq and hash); keep it outside the ledger as an anchor."""
    with open_ledger(db_url, read_only=True) as ledger:
        current = ledger.chain_head()
    if as_json:
        click.echo(json.dumps({"seq": current.seq, "hash": current.hash,
                               "anchor": current.anchor}, indent=2))  # fmt: skip
        return
    click.echo(f"head seq {current.seq} hash {current.hash}")
    click.echo(f"anchor: supervisor audit verify --anchor {current.anchor}")
