"""``supervisor traces push URL``: the OTLP export sent to a collector over OTLP/HTTP.

The spans are those of ``traces export --format otlp-json`` (same selection, same redaction).
The URL and headers may also come from the standard OpenTelemetry variables:
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as given), ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base:
``/v1/traces`` is added), ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` / ``OTEL_EXPORTER_OTLP_HEADERS``
(``key=value,key2=value2``, values percent-decoded). Headers in the environment stay out of
the process list; ``--header`` wins for the same name. Header values are never printed.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

import click

from supervisor.cli.output import echo_line
from supervisor.cli.proposals import db_option, open_ledger

#: An HTTP header name (an RFC 9110 token).
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _header(text: str, source: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not equals or not _HEADER_NAME.match(name):
        raise click.BadParameter(
            f"a header is NAME=VALUE with a token as the name (one of {source} is not; its "
            "value is not shown).",
            param_hint="--header",
        )
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
        raise click.BadParameter(
            f"the value of header {name} holds a control character (not shown).",
            param_hint="--header",
        )
    return name, value


def collector_headers(options: tuple[str, ...]) -> dict[str, str]:
    """Headers from the environment, then ``--header`` options (which win by name)."""
    headers: dict[str, str] = {}
    variable = next(
        (name for name in ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")
         if os.environ.get(name)), None,
    )  # fmt: skip
    if variable is not None:
        for item in os.environ[variable].split(","):
            if item.strip():
                name, value = _header(item, variable)
                headers[name] = unquote(value)
    for option in options:
        name, value = _header(option, "the --header options")
        headers = {key: kept for key, kept in headers.items() if key.lower() != name.lower()}
        headers[name] = value
    return headers


def collector_url(url: str | None) -> str:
    """The URL argument, else the OpenTelemetry endpoint variables."""
    if url:
        return url
    if traces := os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return traces
    if base := os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return base.rstrip("/") + "/v1/traces"
    raise click.UsageError(
        "Give the collector URL (e.g. http://localhost:4318) or set OTEL_EXPORTER_OTLP_ENDPOINT."
    )


@click.command("push")
@click.argument("url", required=False)
@click.option(
    "-H", "--header", "header_options", multiple=True, metavar="NAME=VALUE",
    help="Request header for the collector (repeatable), e.g. Authorization=Bearer ...",
)  # fmt: skip
@click.option(
    "--protocol", type=click.Choice(["http/protobuf", "http/json"]), default="http/protobuf",
    show_default=True, help="OTLP/HTTP body encoding.",
)  # fmt: skip
@click.option("--agent", "agent_id", default=None, help="Only this agent.")
@click.option("--since", default=None, help="ISO-8601 time or a duration (30m, 2h, 7d).")
@click.option(
    "--timeout", "timeout_seconds", type=click.FloatRange(0.1, 600), default=10.0,
    show_default=True, help="Seconds per request.",
)  # fmt: skip
@db_option
def push(
    url: str | None, header_options: tuple[str, ...], protocol: str, agent_id: str | None,
    since: str | None, timeout_seconds: float, db_url: str | None,
) -> None:  # fmt: skip
    """POST the OTLP trace export (GenAI and approval spans) to a collector at URL.

    URL is the collector's OTLP/HTTP address; without a path, /v1/traces is used. Connection
    errors and HTTP 429/502/503/504 are retried twice with backoff; a failure exits 2 with a
    typed error and changes nothing.
    """
    from supervisor.analysis.export import ledger_selection
    from supervisor.analysis.otlp import otlp_document
    from supervisor.analysis.otlp_push import Collector, push_document
    from supervisor.cli.analysis import since_option

    start = since_option(since)
    collector = Collector.parse(
        collector_url(url), collector_headers(header_options),
        "http/json" if protocol == "http/json" else "http/protobuf",
    )  # fmt: skip
    with open_ledger(db_url, read_only=True) as ledger:
        events, approvals = ledger_selection(ledger, agent_id=agent_id, since=start)
        document = otlp_document(events, approvals)
    report = push_document(document, collector, timeout_seconds=timeout_seconds)
    echo_line(f"pushed {report.spans} spans to {collector.shown}")
    if report.rejected:
        echo_line(
            f"warning [otlp_spans_rejected]: the collector rejected {report.rejected} of them"
            + (f": {report.rejected_reason[:200]}" if report.rejected_reason else ""),
            err=True,
        )
