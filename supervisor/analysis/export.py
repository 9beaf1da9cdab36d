"""Export trace events as JSON lines or as OpenTelemetry (OTLP/JSON) GenAI spans.

The OTLP mapping (``invoke_agent``, ``execute_tool``, ``chat`` and ``approval`` spans) is
:mod:`supervisor.analysis.otlp`; pushing it to a collector over OTLP/HTTP is
:mod:`supervisor.analysis.otlp_push`. Both file formats escape control, bidi and invisible
characters as JSON ``\\uXXXX`` escapes (:func:`supervisor.services.rendering.visible_json`),
so a file shown with ``cat`` cannot drive the terminal and still parses to the same values.

Both formats pass every event through :func:`redacted_event` first: known secret values were
replaced when the event was written (see ``ApprovalLedger.trace_secrets``); here the pattern
pass of :mod:`supervisor.redact` and this process's secret environment values run again over
every string the event holds (ids, kind, tool, outcome status, reason code, blob reference,
payload keys and values: :func:`supervisor.redact.redact_event`, the same walk as at write
time), for events written by any process. ``supervisor traces tail`` prints events through the
same function; approval facts get the same text pass (:meth:`ApprovalFacts.redacted`). Pattern
redaction is best effort (docs/tools.md, "Secrets in traces").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import IO

from supervisor.analysis.analyzer import iter_events
from supervisor.analysis.approvals import ApprovalFacts, iter_approval_facts
from supervisor.analysis.otlp import document_spans, otlp_document
from supervisor.ledger.models import TraceEvent
from supervisor.ledger.service import ApprovalLedger
from supervisor.redact import redact_event, text_redactor
from supervisor.services.rendering import dumps_visible, visible_json

__all__ = [
    "export_jsonl", "export_otlp_json", "ledger_selection", "otlp_document", "redacted_event",
]  # fmt: skip


def redacted_event(
    event: TraceEvent, redact_text: Callable[[str], str] | None = None
) -> TraceEvent:
    """``event`` with secrets redacted from every string it holds, payload keys included.

    Args:
        event: A trace event as read from a ledger or a trace file.
        redact_text: The text pass to apply; by default :func:`supervisor.redact.text_redactor`
            (patterns and this process's secret environment values, gathered now). Callers
            redacting many events pass one, so the environment is read once.
    """
    return redact_event(event, redact_text or text_redactor())


def export_jsonl(events: Iterable[TraceEvent], out: IO[str]) -> int:
    """Write one JSON object per event (redacted); returns how many were written."""
    redact_text = text_redactor()
    written = 0
    for event in events:
        out.write(visible_json(redacted_event(event, redact_text).model_dump_json()) + "\n")
        written += 1
    return written


def export_otlp_json(
    events: Iterable[TraceEvent], out: IO[str], approvals: Iterable[ApprovalFacts] = ()
) -> int:
    """Write the OTLP/JSON document for ``events`` and ``approvals`` (approval spans, see
    :mod:`supervisor.analysis.otlp`); returns the number of spans."""
    document = otlp_document(events, approvals)
    out.write(dumps_visible(document) + "\n")
    return len(document_spans(document))


def ledger_selection(
    ledger: ApprovalLedger, *, agent_id: str | None = None, since: datetime | None = None
) -> tuple[Iterator[TraceEvent], list[ApprovalFacts]]:
    """The trace events and approval facts an export of ``ledger`` holds.

    Args:
        ledger: The ledger to read.
        agent_id: Only this agent's events and proposals.
        since: Only events at or after this time, and proposals made at or after it.
    """
    events = (
        event
        for event in iter_events(ledger)
        if (agent_id is None or event.agent_id == agent_id) and (since is None or event.at >= since)
    )
    approvals = [
        facts
        for facts in iter_approval_facts(ledger)
        if (agent_id is None or facts.owner == agent_id)
        and (since is None or facts.created_at >= since)
    ]
    return events, approvals
