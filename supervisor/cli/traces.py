"""``supervisor traces``: tail or export the tool trace, or review one offline in the TUI.

Every command here only reads the ledger, so it opens it read-only and refuses one that does
not exist. ``review`` checks its source before the TUI starts: a ledger must open, and the
first screen of a JSONL file (``REVIEW_CHECK_LINES`` events) must be trace events.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from supervisor.cli.output import echo_json_text, echo_line
from supervisor.cli.proposals import db_option, ledger_url, open_ledger
from supervisor.ledger.models import TraceEvent
from supervisor.services.review.rows import TRACE_SUFFIXES
from supervisor.services.traces import MAX_TRACE_CAPACITY

#: Lines of a JSONL trace checked before the review opens (one screen; a 1 GB file is not
#: read in full up front, later lines are checked by the review as it indexes them).
REVIEW_CHECK_LINES = 200
#: Most events ``traces tail -n`` shows first: the trace buffer's own cap.
TAIL_MAX_LINES = MAX_TRACE_CAPACITY


def _line(event: TraceEvent) -> str:
    return (
        f"{event.event_id:>8} {event.at:%Y-%m-%d %H:%M:%S} {event.agent_id or '-':<14} "
        f"{event.kind:<12} {event.tool or '-':<18} {event.outcome_status or '-':<10} "
        f"{event.reason_code or ''}{'  ' + event.blob_ref if event.blob_ref else ''}"
    )


@click.group()
def traces() -> None:
    """Tail, export and review tool traces."""


@traces.command("tail")
@click.option(
    "-n", "--lines", default=20, show_default=True, type=click.IntRange(0, TAIL_MAX_LINES),
    help="Events to show first (0: only follow new ones).",
)  # fmt: skip
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events.")
@click.option("--agent", "agent_id", default=None, help="Only this agent.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines.")
@db_option
def tail(lines: int, follow: bool, agent_id: str | None, as_json: bool, db_url: str | None) -> None:
    """Print the newest trace events (and follow with -f)."""
    with open_ledger(db_url, read_only=True) as ledger:
        from supervisor.analysis.export import redacted_event
        from supervisor.redact import text_redactor
        from supervisor.services.settings import SupervisorSettings
        from supervisor.services.traces import TracesService

        service = TracesService(ledger, SupervisorSettings(trace_capacity=max(1, lines)))
        while True:
            batch = service.poll()
            if batch is None or len(batch.events) < 2000:
                break
        shown = service.events() if lines else []
        redact_text = text_redactor()
        while True:
            for event in shown:
                if agent_id is None or event.agent_id == agent_id:
                    redacted = redacted_event(event, redact_text)  # as exports are
                    if as_json:
                        echo_json_text(redacted.model_dump_json())
                    else:
                        echo_line(_line(redacted))
            if not follow:
                return
            while (batch := service.poll()) is None:
                time.sleep(0.2)
            shown = list(batch.events)


@traces.command("export")
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "otlp-json"]), default="jsonl",
    show_default=True,
    help="JSON lines (what `traces review` reads) or OTLP/JSON GenAI and approval spans.",
)  # fmt: skip
@click.option("-o", "--output", type=click.Path(dir_okay=False), default="-", help="File or -.")
@click.option("--agent", "agent_id", default=None, help="Only this agent.")
@click.option("--since", default=None, help="ISO-8601 time or a duration (30m, 2h, 7d).")
@db_option
def export(
    fmt: str, output: str, agent_id: str | None, since: str | None, db_url: str | None
) -> None:
    """Export trace events as JSON lines or OpenTelemetry OTLP/JSON spans."""
    from supervisor.analysis.export import export_jsonl, export_otlp_json, ledger_selection
    from supervisor.cli.analysis import since_option

    start = since_option(since)
    with open_ledger(db_url, read_only=True) as ledger:
        ledger.head()  # open (and check) the ledger before the output file is created
        stream = sys.stdout if output == "-" else open(output, "w", encoding="utf-8")
        try:
            events, approvals = ledger_selection(ledger, agent_id=agent_id, since=start)
            if fmt == "otlp-json":
                written = export_otlp_json(events, stream, approvals)
            else:
                written = export_jsonl(events, stream)
        finally:
            if stream is not sys.stdout:
                stream.close()
    if output != "-":
        unit = "spans" if fmt == "otlp-json" else "events"
        click.echo(f"exported {written} {unit} to {output}", err=True)


def _register_analysis() -> None:
    from supervisor.cli.analysis import analyze
    from supervisor.cli.traces_push import push

    traces.add_command(analyze)
    traces.add_command(push)


_register_analysis()


@traces.command("review")
@click.argument("source", required=False)
@db_option
def review(source: str | None, db_url: str | None) -> None:
    """Open the read-only offline review of SOURCE (ledger file/URL or JSONL trace)."""
    from supervisor.cli.tui import open_review

    target = source or ledger_url(db_url)
    if target is None:
        from supervisor.store.engine import resolve_url

        target = resolve_url(None)
    check_review_source(target)
    open_review(target)


@traces.command("prune")
@click.option(
    "--older-than", default=None,
    help="Drop events older than a duration (30m, 2h, 7d) or an ISO-8601 time [default: 30d].",
)  # fmt: skip
@click.option(
    "--max-events", type=click.IntRange(min=1), default=None,
    help="Keep at most this many of the newest events [default: 1000000].",
)  # fmt: skip
@db_option
def prune(older_than: str | None, max_events: int | None, db_url: str | None) -> None:
    """Delete trace events past the retention policy; a live proposal's thread keeps its own."""
    from datetime import UTC, datetime

    from supervisor.analysis.analyzer import parse_since
    from supervisor.ledger.retention import TraceRetention

    defaults = TraceRetention()
    max_age = defaults.max_age_seconds
    if older_than is not None:
        now = datetime.now(UTC)
        try:
            max_age = (now - parse_since(older_than, now=now)).total_seconds()
        except (ValueError, OverflowError):
            max_age = None
        if max_age is None or not 0 < max_age <= 100 * 365 * 86_400:
            raise click.BadParameter(
                f"{older_than!r} is not a past time or a positive duration like 30m, 2h or 7d.",
                param_hint="--older-than",
            )
    retention = defaults.model_copy(
        update={"max_age_seconds": max_age, "max_events": max_events or defaults.max_events}
    )
    with open_ledger(db_url, must_exist=True) as ledger:
        pruned = ledger.prune_traces(retention)
    click.echo(f"pruned {pruned} trace events")


def check_review_source(source: str) -> None:
    """Fail with a typed error, before any UI starts, when ``source`` cannot be reviewed.

    Raises:
        TraceFileNotFound: A JSONL path that does not exist.
        TraceFileInvalid: One of its first ``REVIEW_CHECK_LINES`` lines is not a trace event.
        LedgerError: The ledger does not exist or cannot be opened (read-only).
    """
    path = Path(source)
    if "://" not in source and path.suffix in TRACE_SUFFIXES:
        _check_trace_file(path)
        return
    with open_ledger(source, read_only=True) as ledger:
        ledger.head()


def _check_trace_file(path: Path) -> None:
    from pydantic import ValidationError

    from supervisor.cli.errors import TraceFileInvalid, TraceFileNotFound

    if not path.is_file():
        raise TraceFileNotFound(str(path))
    checked = 0
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                TraceEvent.model_validate_json(line)
            except ValidationError as error:
                problems = error.errors(include_url=False, include_input=False)[:3]
                reason = "; ".join(
                    ": ".join(filter(None, (".".join(map(str, item["loc"])), item["msg"])))
                    for item in problems
                )
                raise TraceFileInvalid(f"line {number} of {path}", reason[:300]) from None
            checked += 1
            if checked >= REVIEW_CHECK_LINES:
                return
