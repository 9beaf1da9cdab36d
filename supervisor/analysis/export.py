"""Export trace events as JSON lines or as OpenTelemetry (OTLP/JSON) GenAI-style spans.

OTLP/JSON mapping (``ExportTraceServiceRequest``): one resource (``service.name =
agent-supervisor``), one scope, and per run a trace whose id is derived from the run id:

* a root span ``invoke_agent <agent>`` (``gen_ai.operation.name = invoke_agent``) covering the
  run's events; events that are not calls (approvals, cache hits, schema changes, elicitations)
  become span events on it;
* one ``execute_tool <tool>`` span per tool call (``tool_call`` to its ``tool_result`` by call
  id), with ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.agent.id`` and the outcome
  status/reason; status ERROR for results that are not usable;
* one ``chat`` span per model call (from the previous event of the run to the reply).

Ids are lowercase hex (trace 32, span 16 digits); 64-bit integers (timestamps) are decimal
strings, as the protobuf JSON mapping requires. Only content-free evidence is exported. Both
formats escape control, bidi and invisible characters as JSON ``\\uXXXX`` escapes
(:func:`supervisor.services.rendering.visible_json`), so a file shown with ``cat`` cannot drive
the terminal and still parses to the same events.

Both formats pass every event through :func:`redacted_event` first: known secret values were
replaced when the event was written (see ``ApprovalLedger.trace_secrets``); here the pattern
pass of :mod:`supervisor.redact` and this process's secret environment values run again over
every string the event holds (ids, kind, tool, outcome status, reason code, blob reference,
payload keys and values: :func:`supervisor.redact.redact_event`, the same walk as at write
time), for events written by any process. ``supervisor traces tail`` prints events through the
same function. Pattern redaction is best effort (docs/tools.md, "Secrets in traces").
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import IO, Any

from supervisor.ledger.models import TraceEvent
from supervisor.outcomes import USABLE_STATUSES
from supervisor.redact import redact_event, text_redactor
from supervisor.services.rendering import dumps_visible, visible_json
from supervisor.version import __version__

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2


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


def _nanos(moment: datetime) -> str:
    return str(int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000)


def _hex_id(*parts: object, digits: int) -> str:
    text = "\x1f".join(str(part) for part in parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:digits]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"key": key, "value": _value(value)} for key, value in values.items() if value is not None
    ]


def _trace_key(event: TraceEvent) -> str:
    if event.run_id:
        return f"run:{event.run_id}"
    return f"agent:{event.agent_id or '-'}:{event.thread_id or '-'}"


def _span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    start: datetime,
    end: datetime,
    attributes: dict[str, Any],
    *,
    kind: int = SPAN_KIND_INTERNAL,
    status: tuple[int, str | None] = (STATUS_UNSET, None),
    events: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": _nanos(start),
        "endTimeUnixNano": _nanos(max(start, end)),
        "attributes": _attributes(attributes),
    }
    if parent:
        span["parentSpanId"] = parent
    if events:
        span["events"] = events
    code, message = status
    span["status"] = {"code": code, **({"message": message} if message else {})}
    return span


def _event_attributes(event: TraceEvent) -> dict[str, Any]:
    return {
        "supervisor.event.kind": event.kind,
        "gen_ai.tool.name": event.tool,
        "supervisor.outcome.status": event.outcome_status,
        "supervisor.reason_code": event.reason_code,
        "supervisor.proposal.id": event.payload.get("proposal_id"),
    }


def _trace_spans(key: str, events: list[TraceEvent]) -> list[dict[str, Any]]:
    trace_id = _hex_id("trace", key, digits=32)
    root_id = _hex_id("root", key, digits=16)
    first = events[0]
    agent = first.agent_id
    spans: list[dict[str, Any]] = []
    span_events: list[dict[str, Any]] = []
    open_calls: dict[str, TraceEvent] = {}
    previous = first.at
    failed = False
    for event in events:
        common = {"gen_ai.agent.id": agent, "gen_ai.conversation.id": event.thread_id}
        call_id = str(event.payload.get("call_id") or "")
        if event.kind == "tool_call" and call_id:
            open_calls[call_id] = event
        elif event.kind == "tool_result":
            started = open_calls.pop(call_id, event) if call_id else event
            status = event.outcome_status or "unknown"
            usable = status in USABLE_STATUSES
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": event.tool,
                "gen_ai.tool.call.id": call_id or None,
                **common,
                "supervisor.outcome.status": status,
                "supervisor.reason_code": event.reason_code,
                "supervisor.proposal.id": event.payload.get("proposal_id"),
            }
            spans.append(
                _span(
                    trace_id,
                    _hex_id("tool", key, event.event_id, call_id, digits=16),
                    root_id,
                    f"execute_tool {event.tool}",
                    started.at,
                    event.at,
                    attributes,
                    status=(STATUS_OK, None) if usable else (STATUS_ERROR, event.reason_code),
                )
            )
        elif event.kind == "model_call":
            error = event.outcome_status == "provider_error"
            failed = failed or error
            attributes = {
                "gen_ai.operation.name": "chat",
                **common,
                "error.type": event.reason_code if error else None,
            }
            spans.append(
                _span(
                    trace_id,
                    _hex_id("chat", key, event.event_id, digits=16),
                    root_id,
                    "chat",
                    previous,
                    event.at,
                    attributes,
                    kind=SPAN_KIND_CLIENT,
                    status=(STATUS_ERROR, event.reason_code) if error else (STATUS_UNSET, None),
                )
            )
        else:
            span_events.append(
                {
                    "timeUnixNano": _nanos(event.at),
                    "name": event.kind,
                    "attributes": _attributes(_event_attributes(event)),
                }
            )
        previous = event.at
    root_attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": agent,
        "gen_ai.conversation.id": first.thread_id,
        "supervisor.run.id": first.run_id,
    }
    root = _span(
        trace_id, root_id, None, f"invoke_agent {agent or ''}".strip(), first.at, events[-1].at,
        root_attributes, status=(STATUS_ERROR, "run_failed") if failed else (STATUS_UNSET, None),
        events=span_events,
    )  # fmt: skip
    return [root, *spans]


def otlp_document(events: Iterable[TraceEvent]) -> dict[str, Any]:
    """The OTLP/JSON ``ExportTraceServiceRequest`` for ``events`` (see the module docstring)."""
    redact_text = text_redactor()
    grouped: dict[str, list[TraceEvent]] = {}
    for event in events:
        redacted = redacted_event(event, redact_text)  # before grouping: ids are redacted too
        grouped.setdefault(_trace_key(redacted), []).append(redacted)
    spans: list[dict[str, Any]] = []
    for key, group in grouped.items():
        spans.extend(_trace_spans(key, group))
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": _attributes(
                        {"service.name": "agent-supervisor", "service.version": __version__}
                    )
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "supervisor.analysis.export", "version": __version__},
                        "spans": spans,
                    }
                ],
            }
        ]
    }


def export_otlp_json(events: Iterable[TraceEvent], out: IO[str]) -> int:
    """Write the OTLP/JSON document for ``events``; returns the number of spans."""
    document = otlp_document(events)
    out.write(dumps_visible(document) + "\n")
    return len(document["resourceSpans"][0]["scopeSpans"][0]["spans"])
