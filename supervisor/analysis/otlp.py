"""Trace events and approvals as an OpenTelemetry ``ExportTraceServiceRequest`` (OTLP/JSON).

One resource (``service.name = agent-supervisor``), one scope, and per run a trace whose id is
derived from the run id. The GenAI semantic conventions name the agent and tool spans:

* a root span ``invoke_agent <agent>`` (``gen_ai.operation.name = invoke_agent``) covering the
  run; trace events that are not calls (approval steps, cache hits, schema changes,
  elicitations, results of calls a decision stopped) become span events on it;
* one ``execute_tool <tool>`` span per call that ran (``tool_call`` to its ``tool_result`` by
  call id), with ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.agent.id``, the
  outcome status/reason and ``error.type``; status ERROR for results that are not usable. For
  an approved call it starts when the call was claimed and links to its approval span;
* one ``chat`` span per model call (from the previous event of the run to the reply), with the
  token counts as ``gen_ai.usage.input_tokens`` / ``output_tokens``;
* one ``approval <tool>`` span per proposal (:mod:`supervisor.analysis.otlp_approvals`): start
  = proposed, end = decided (or expired), with who or which rule decided and the wait, for
  calls that ran and for calls that were rejected, expired or cancelled and never ran.

A proposal joins the trace of the run whose events name it (or its call id in the same
thread); one no run event names (an MCP gate or browser call, a run outside the export) gets
a trace of its agent and thread.

Ids are lowercase hex (trace 32, span 16 digits); 64-bit integers (timestamps) are decimal
strings, as the OTLP/JSON mapping requires. Only content-free evidence is exported: every
event and every approval passes through the redaction of :mod:`supervisor.redact` first
(:func:`supervisor.redact.redact_event`, :meth:`ApprovalFacts.redacted`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from supervisor.analysis.approvals import ApprovalFacts
from supervisor.analysis.otlp_approvals import approval_span, approval_span_id
from supervisor.analysis.otlp_spans import (
    SPAN_KIND_CLIENT,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    attributes,
    hex_id,
    nanos,
    span,
)
from supervisor.ledger.models import TraceEvent
from supervisor.outcomes import USABLE_STATUSES
from supervisor.redact import redact_event, text_redactor
from supervisor.version import __version__

#: Outcome statuses of calls a decision stopped before they ran (DESIGN §5): never an
#: ``execute_tool`` span, a span event on the run instead.
NOT_RUN_STATUSES = frozenset(
    {"denied", "expired", "cancelled", "superseded", "timeout", "needs_reconciliation"}
)
SCOPE_NAME = "supervisor.analysis.export"


def _trace_key(event: TraceEvent) -> str:
    if event.run_id:
        return f"run:{event.run_id}"
    return f"agent:{event.agent_id or '-'}:{event.thread_id or '-'}"


def _event_attributes(event: TraceEvent) -> dict[str, Any]:
    return {
        "supervisor.event.kind": event.kind,
        "gen_ai.tool.name": event.tool,
        "gen_ai.tool.call.id": event.payload.get("call_id"),
        "supervisor.outcome.status": event.outcome_status,
        "supervisor.reason_code": event.reason_code,
        "supervisor.proposal.id": event.payload.get("proposal_id"),
        "supervisor.approval.decided_by": event.payload.get("decided_by"),
    }


def _usage(event: TraceEvent) -> dict[str, Any]:
    usage = event.payload.get("usage")
    if not isinstance(usage, dict):
        return {}
    found = {
        "gen_ai.usage.input_tokens": usage.get("prompt_tokens"),
        "gen_ai.usage.output_tokens": usage.get("completion_tokens"),
    }
    return {key: value for key, value in found.items() if isinstance(value, int)}


def _tool_span(
    trace_id: str, root_id: str, key: str, event: TraceEvent, started: TraceEvent,
    approval: ApprovalFacts | None, common: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    call_id = str(event.payload.get("call_id") or "")
    status = event.outcome_status or "unknown"
    usable = status in USABLE_STATUSES
    start = started.at
    links: list[dict[str, Any]] = []
    if approval is not None:  # it ran once approved: from the claim (or the decision) on
        start = max(start, approval.claimed_at or approval.decided_at or start)
        links.append({"traceId": trace_id, "spanId": approval_span_id(key, approval),
                      "attributes": attributes({"supervisor.link": "approval"})})  # fmt: skip
    values = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": event.tool,
        "gen_ai.tool.call.id": call_id or None,
        **common,
        "supervisor.outcome.status": status,
        "supervisor.reason_code": event.reason_code,
        "supervisor.proposal.id": event.payload.get("proposal_id"),
        "error.type": None if usable else (event.reason_code or status),
    }
    return span(
        trace_id, hex_id("tool", key, event.event_id, call_id, digits=16), root_id,
        f"execute_tool {event.tool}", start, event.at, values,
        status=(STATUS_OK, None) if usable else (STATUS_ERROR, event.reason_code), links=links,
    )  # fmt: skip


def _trace_spans(
    key: str, events: list[TraceEvent], approvals: list[ApprovalFacts], now: datetime
) -> list[dict[str, Any]]:
    trace_id = hex_id("trace", key, digits=32)
    root_id = hex_id("root", key, digits=16)
    first = events[0] if events else None
    agent = first.agent_id if first else approvals[0].owner
    thread = first.thread_id if first else approvals[0].thread_id
    by_proposal = {facts.proposal_id: facts for facts in approvals}
    spans = [approval_span(trace_id, root_id, key, facts, now) for facts in approvals]
    span_events: list[dict[str, Any]] = []
    open_calls: dict[str, TraceEvent] = {}
    moments = [facts.created_at for facts in approvals]
    moments += [facts.decided_moment(now) for facts in approvals]
    previous = first.at if first else min(moments)
    failed = False
    for event in events:
        common = {"gen_ai.agent.id": agent, "gen_ai.conversation.id": event.thread_id}
        call_id = str(event.payload.get("call_id") or "")
        if event.kind == "tool_call" and call_id:
            open_calls[call_id] = event
        elif event.kind == "tool_result" and event.outcome_status not in NOT_RUN_STATUSES:
            started = open_calls.pop(call_id, event) if call_id else event
            approval = by_proposal.get(str(event.payload.get("proposal_id") or ""))
            spans.append(_tool_span(trace_id, root_id, key, event, started, approval, common))
        elif event.kind == "model_call":
            error = event.outcome_status == "provider_error"
            failed = failed or error
            values = {"gen_ai.operation.name": "chat", **common, **_usage(event),
                      "error.type": event.reason_code if error else None}  # fmt: skip
            spans.append(span(
                trace_id, hex_id("chat", key, event.event_id, digits=16), root_id, "chat",
                previous, event.at, values, kind=SPAN_KIND_CLIENT,
                status=(STATUS_ERROR, event.reason_code) if error else (STATUS_UNSET, None),
            ))  # fmt: skip
        else:
            if event.kind == "tool_result":  # a call a decision stopped: it never ran
                open_calls.pop(call_id, None)
            span_events.append({"timeUnixNano": nanos(event.at), "name": event.kind,
                                "attributes": attributes(_event_attributes(event))})  # fmt: skip
        previous = event.at
    moments += [event.at for event in events]
    root_attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": agent,
        "gen_ai.conversation.id": thread,
        "supervisor.run.id": first.run_id if first else None,
    }
    root = span(
        trace_id, root_id, None, f"invoke_agent {agent or ''}".strip(), min(moments),
        max(moments), root_attributes, events=span_events,
        status=(STATUS_ERROR, "run_failed") if failed else (STATUS_UNSET, None),
    )  # fmt: skip
    return [root, *spans]


def _approval_keys(
    grouped: dict[str, list[TraceEvent]], approvals: list[ApprovalFacts]
) -> dict[str, list[ApprovalFacts]]:
    """Which trace each approval joins (see the module docstring), approvals by trace key."""
    by_proposal: dict[str, str] = {}
    by_call: dict[tuple[str, str, str], str] = {}
    for key, events in grouped.items():
        for event in events:
            proposal_id, call_id = event.payload.get("proposal_id"), event.payload.get("call_id")
            if isinstance(proposal_id, str):
                by_proposal.setdefault(proposal_id, key)
            if event.kind == "tool_call" and isinstance(call_id, str):
                by_call.setdefault((event.agent_id or "", event.thread_id or "", call_id), key)
    keyed: dict[str, list[ApprovalFacts]] = {}
    for facts in sorted(approvals, key=lambda item: (item.created_at, item.proposal_id)):
        key = (
            by_proposal.get(facts.proposal_id)
            or by_call.get((facts.owner, facts.thread_id or "", facts.call_id or ""))
            or by_proposal.get(facts.supersedes_id or "")
            or f"agent:{facts.owner or '-'}:{facts.thread_id or '-'}"
        )
        by_proposal.setdefault(facts.proposal_id, key)  # an edit of it follows it
        keyed.setdefault(key, []).append(facts)
    return keyed


def otlp_document(
    events: Iterable[TraceEvent],
    approvals: Iterable[ApprovalFacts] = (),
    *,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The OTLP/JSON ``ExportTraceServiceRequest`` for ``events`` and ``approvals``.

    Args:
        events: Trace events, in id order.
        approvals: Facts of the proposals to show as approval spans.
        now: The moment a still-pending approval's span ends at (default: the current time).
    """
    moment = now or datetime.now(UTC)
    redact_text = text_redactor()
    grouped: dict[str, list[TraceEvent]] = {}
    for event in events:
        redacted = redact_event(event, redact_text)  # before grouping: ids are redacted too
        grouped.setdefault(_trace_key(redacted), []).append(redacted)
    keyed = _approval_keys(grouped, [facts.redacted(redact_text) for facts in approvals])
    spans: list[dict[str, Any]] = []
    for key in [*grouped, *(key for key in keyed if key not in grouped)]:
        spans.extend(_trace_spans(key, grouped.get(key, []), keyed.get(key, []), moment))
    resource = {"service.name": "agent-supervisor", "service.version": __version__}
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": attributes(resource)},
                "scopeSpans": [
                    {"scope": {"name": SCOPE_NAME, "version": __version__}, "spans": spans}
                ],
            }
        ]
    }


def document_spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The spans of a document :func:`otlp_document` built."""
    spans: list[dict[str, Any]] = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return spans


def with_spans(document: dict[str, Any], spans: list[dict[str, Any]]) -> dict[str, Any]:
    """``document`` (its resource and scope) holding only ``spans``."""
    (resource_spans,) = document["resourceSpans"]
    (scope_spans,) = resource_spans["scopeSpans"]
    return {"resourceSpans": [{**resource_spans, "scopeSpans": [{**scope_spans, "spans": spans}]}]}
