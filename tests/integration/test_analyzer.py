"""Trace analyzer figures against a generated ledger with known counts; OTLP/JSON export shape."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from supervisor.analysis.analyzer import analyze, parse_since, percentile
from supervisor.analysis.export import export_jsonl, export_otlp_json, otlp_document
from supervisor.cli.analysis import analyze as analyze_command
from supervisor.cli.traces import export as export_otlp
from supervisor.ledger.clock import ManualClock
from supervisor.ledger.models import TraceEvent
from supervisor.store.provider import SQLModelProvider

T0 = datetime(2030, 1, 1, tzinfo=UTC)
#: (tool, status, reason_code, degraded) -> how many results of that kind
RESULTS: dict[tuple[str, str, str | None, bool], int] = {
    ("search", "success", None, False): 6,
    ("search", "empty", None, False): 2,
    ("search", "fallback", "primary_timeout", True): 1,
    ("search", "provider_error", "rate_limited", False): 1,
    ("crm", "success", None, False): 3,
    ("crm", "degraded", "partial_index", True): 1,
    ("crm", "error", "tool_exception", False): 2,
    ("crm", "provider_error", "upstream_timeout", False): 1,
}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def provider(sqlite_url: str, clock: ManualClock) -> Iterator[SQLModelProvider]:
    memory = SQLModelProvider(sqlite_url, clock=clock)
    yield memory
    memory.close()


def _event(at: datetime, kind: str, run: str, **fields: Any) -> TraceEvent:
    payload = fields.pop("payload", {})
    return TraceEvent(
        at=at, agent_id="ops", thread_id="t1", run_id=run, kind=kind, payload=payload, **fields
    )


def _generate(provider: SQLModelProvider, clock: ManualClock) -> None:
    ledger = provider.ledger
    events: list[TraceEvent] = [
        # Before --since: must not count.
        _event(T0 - timedelta(days=2), "tool_result", "old", tool="search", outcome_status="error",
               reason_code="ancient", payload={"call_id": "old"}),
    ]  # fmt: skip
    at = T0
    index = 0
    for (tool, status, reason, degraded), count in RESULTS.items():
        for _ in range(count):
            index += 1
            run = f"run-{index % 3}"
            call_id = f"call-{index}"
            events.append(_event(at, "tool_call", run, tool=tool, payload={"call_id": call_id}))
            at += timedelta(milliseconds=250)
            outcome = {"status": status, "reason_code": reason, "degraded": degraded}
            events.append(
                _event(at, "tool_result", run, tool=tool, outcome_status=status,
                       reason_code=reason, payload={"call_id": call_id, "outcome": outcome})
            )  # fmt: skip
            at += timedelta(milliseconds=250)
    events.append(_event(at, "model_call", "run-0", outcome_status="provider_error",
                         reason_code="model_unavailable"))  # fmt: skip
    events.append(_event(at, "approval", "run-1", tool="crm", outcome_status="pending",
                         payload={"proposal_id": "p1", "call_id": "x"}))  # fmt: skip
    ledger.append_trace(events)

    decided = [ledger.propose("crm", "h" * 64, {"n": n}, owner="ops") for n in range(5)]
    ledger.propose("crm", "h" * 64, {"n": 10}, owner="ops")  # stays pending
    for n in range(2):
        ledger.propose("crm", "h" * 64, {"n": 20 + n}, owner="ops", ttl_seconds=50)
    for proposal in decided[:4]:
        clock.advance(10)  # approved after 10, 20, 30, 40 seconds
        ledger.approve(proposal.proposal_id, "operator@example.com")
    clock.advance(60)
    ledger.reject(decided[4].proposal_id, "operator@example.com", "no")  # after 100 s
    ledger.expire_due()


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([10, 20, 30, 40, 100], 50) == 30
    assert percentile([10, 20, 30, 40, 100], 95) == 100
    assert percentile([5], 95) == 5


def test_parse_since_accepts_iso_and_durations() -> None:
    now = datetime(2030, 1, 2, tzinfo=UTC)
    assert parse_since("2h", now=now) == now - timedelta(hours=2)
    assert parse_since("7d", now=now) == now - timedelta(days=7)
    assert parse_since("2030-01-01T00:00:00") == T0
    assert parse_since("2030-01-01T00:00:00Z") == T0
    with pytest.raises(ValueError):
        parse_since("yesterday")


def test_figures_match_the_generated_ledger(provider: SQLModelProvider, clock: ManualClock) -> None:
    _generate(provider, clock)
    stats = analyze(provider.ledger, since=T0 - timedelta(hours=1))
    tools = {tool.tool: tool for tool in stats.tools}
    search, crm = tools["search"], tools["crm"]
    assert search.results == 10 and crm.results == 7
    assert search.by_status == {"empty": 2, "fallback": 1, "provider_error": 1, "success": 6}
    assert search.usable == 9 and search.usable_rate == 0.9
    assert search.fallback_rate == 0.1 and search.degraded_rate == 0.1
    assert crm.usable == 4 and crm.usable_rate == round(4 / 7, 4)
    assert crm.fallback_rate == 0.0 and crm.degraded_rate == round(1 / 7, 4)
    assert stats.tool_results == 17
    assert stats.usable_rate == round(13 / 17, 4)
    assert stats.degraded_rate == round(2 / 17, 4)
    assert stats.provider_error_codes == {
        "rate_limited": 1, "upstream_timeout": 1, "model_unavailable": 1,
    }  # fmt: skip
    assert stats.top_reason_codes[0] == ("tool_exception", 2)
    assert "ancient" not in dict(stats.top_reason_codes)
    assert stats.runs == 3
    assert stats.proposals == 8
    assert stats.expired == 2 and stats.rejected == 1
    assert stats.proposals_by_status == {
        "approved": 4, "expired": 2, "pending": 1, "rejected": 1,
    }  # fmt: skip
    assert stats.decided == 5
    assert stats.approval_latency_p50_s == 30.0
    assert stats.approval_latency_p95_s == 100.0
    everything = analyze(provider.ledger)
    assert everything.tool_results == 18  # the old event counts without --since
    assert dict(everything.top_reason_codes)["ancient"] == 1


def test_cli_analyze_prints_the_same_numbers(
    provider: SQLModelProvider, clock: ManualClock, sqlite_url: str
) -> None:
    _generate(provider, clock)
    runner = CliRunner()
    done = runner.invoke(
        analyze_command, ["--db", sqlite_url, "--json", "--since", "2029-12-31T23:00:00Z"]
    )
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["approval_latency_p95_s"] == 100.0
    assert {tool["tool"]: tool["usable_rate"] for tool in report["tools"]}["search"] == 0.9
    text = runner.invoke(analyze_command, ["--db", sqlite_url])
    assert text.exit_code == 0
    assert "p50 30.0s" in text.output and "search" in text.output
    bad = runner.invoke(analyze_command, ["--db", sqlite_url, "--since", "soon"])
    assert bad.exit_code != 0 and "--since" in bad.output


# -- OTLP/JSON shape --------------------------------------------------------------------

_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_VALUE_KEYS = {"stringValue", "intValue", "doubleValue", "boolValue", "arrayValue", "kvlistValue"}


def _nanos(value: Any) -> int:
    assert isinstance(value, (str, int)) and not isinstance(value, bool), value
    assert re.fullmatch(r"\d+", str(value)), value
    return int(value)


def _check_attributes(attributes: Any) -> dict[str, Any]:
    assert isinstance(attributes, list)
    flat: dict[str, Any] = {}
    for attribute in attributes:
        assert set(attribute) == {"key", "value"} and isinstance(attribute["key"], str)
        (kind,) = attribute["value"]
        assert kind in _VALUE_KEYS
        if kind == "intValue":
            assert re.fullmatch(r"-?\d+", attribute["value"][kind])
        flat[attribute["key"]] = attribute["value"][kind]
    return flat


def validate_otlp(document: Any) -> list[dict[str, Any]]:
    """Structural check of an OTLP/JSON ExportTraceServiceRequest; returns the spans."""
    assert isinstance(document, dict) and set(document) == {"resourceSpans"}
    spans: list[dict[str, Any]] = []
    for resource_spans in document["resourceSpans"]:
        _check_attributes(resource_spans["resource"]["attributes"])
        for scope_spans in resource_spans["scopeSpans"]:
            assert isinstance(scope_spans["scope"]["name"], str)
            for span in scope_spans["spans"]:
                assert _HEX32.match(span["traceId"]) and set(span["traceId"]) != {"0"}
                assert _HEX16.match(span["spanId"]) and set(span["spanId"]) != {"0"}
                if "parentSpanId" in span:
                    assert _HEX16.match(span["parentSpanId"])
                assert isinstance(span["name"], str) and span["name"]
                assert span["kind"] in range(6)
                assert _nanos(span["endTimeUnixNano"]) >= _nanos(span["startTimeUnixNano"])
                span["flat"] = _check_attributes(span["attributes"])
                assert span["status"]["code"] in (0, 1, 2)
                for event in span.get("events", []):
                    _nanos(event["timeUnixNano"])
                    assert isinstance(event["name"], str)
                    _check_attributes(event["attributes"])
                spans.append(span)
    ids = {(span["traceId"], span["spanId"]) for span in spans}
    assert len(ids) == len(spans), "span ids must be unique within a trace"
    for span in spans:
        if "parentSpanId" in span:
            assert (span["traceId"], span["parentSpanId"]) in ids, "parent must exist"
    return spans


def test_otlp_export_has_the_otlp_json_shape_and_genai_attributes(
    provider: SQLModelProvider, clock: ManualClock
) -> None:
    _generate(provider, clock)
    events = provider.ledger.trace_events(limit=10_000)
    out = io.StringIO()
    count = export_otlp_json(events, out)
    spans = validate_otlp(json.loads(out.getvalue()))
    assert count == len(spans)
    tools = [span for span in spans if span["flat"].get("gen_ai.operation.name") == "execute_tool"]
    assert len(tools) == 18
    assert all(span["flat"]["gen_ai.agent.id"] == "ops" for span in tools)
    errors = [span for span in tools if span["status"]["code"] == 2]
    assert len(errors) == 1 + 2 + 1 + 1  # provider errors, errors and the old error
    paired = [span for span in tools if span["flat"]["gen_ai.tool.call.id"] == "call-1"]
    assert _nanos(paired[0]["endTimeUnixNano"]) - _nanos(paired[0]["startTimeUnixNano"]) == (
        250_000_000
    )
    roots = [span for span in spans if "parentSpanId" not in span]
    assert {root["flat"]["gen_ai.operation.name"] for root in roots} == {"invoke_agent"}
    assert len(roots) == 4  # run-0, run-1, run-2 and the old run
    approvals = [event for root in roots for event in root.get("events", [])]
    assert [event["name"] for event in approvals] == ["approval"]
    chats = [span for span in spans if span["name"] == "chat"]
    assert chats and chats[0]["status"]["code"] == 2


def test_otlp_export_is_deterministic_and_content_free() -> None:
    secret = "sk-live-abcdefghijklmnop"
    event = TraceEvent(
        event_id=1, at=T0, agent_id="a", run_id="r", kind="tool_result", tool="t",
        outcome_status="success", payload={"call_id": "c", "error_detail": secret},
    )  # fmt: skip
    first = otlp_document([event])
    assert first == otlp_document([event])
    assert secret not in json.dumps(first)
    validate_otlp(first)


def test_jsonl_export_round_trips(provider: SQLModelProvider, clock: ManualClock) -> None:
    _generate(provider, clock)
    events = provider.ledger.trace_events(limit=10_000)
    out = io.StringIO()
    assert export_jsonl(events, out) == len(events)
    lines = out.getvalue().splitlines()
    assert [TraceEvent.model_validate_json(line) for line in lines] == events


def test_cli_export_writes_otlp_and_jsonl(
    provider: SQLModelProvider, clock: ManualClock, sqlite_url: str, tmp_path: Any
) -> None:
    _generate(provider, clock)
    target = tmp_path / "spans.json"
    runner = CliRunner()
    done = runner.invoke(
        export_otlp, ["--db", sqlite_url, "--format", "otlp-json", "-o", str(target)]
    )
    assert done.exit_code == 0, done.output
    validate_otlp(json.loads(target.read_text()))
    lines = runner.invoke(
        export_otlp, ["--db", sqlite_url, "--format", "jsonl", "--since", "2029-12-31T00:00:00Z"]
    )
    assert lines.exit_code == 0
    kinds = [json.loads(line)["kind"] for line in lines.stdout.splitlines() if line.startswith("{")]
    assert len(kinds) == 2 * 17 + 2  # the old event is before --since
