"""The OTLP export of a real run shows every call: those that ran as ``execute_tool`` spans and
every approval, including calls that were rejected, denied by a rule or expired and never ran.

The run (``tests/support/approval_run.py``) goes through the SDK against the shipped
``ScriptedModel`` on a real SQLite ledger; the export is ``supervisor traces export --format
otlp-json``, decoded by the official OpenTelemetry protobuf classes (``tests/support/otlp.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support.approval_run import ARGUMENT_VALUES, HOSTILE, ApprovalRun, approval_run
from support.otlp import Span, decode_json, spans_of

from supervisor.analysis.approvals import iter_approval_facts
from supervisor.analysis.otlp import document_spans, otlp_document
from supervisor.analysis.otlp_proto import encode_trace_request
from supervisor.cli.traces import traces
from supervisor.store.provider import SQLModelProvider


@pytest.fixture
def run(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ApprovalRun:
    monkeypatch.setenv("SIDE_EFFECT_FILE", str(tmp_path / "side_effects.log"))
    return approval_run(sqlite_url)


def _export(url: str, tmp_path: Path) -> tuple[str, list[Span]]:
    target = tmp_path / "spans.json"
    done = CliRunner().invoke(traces, ["export", "--format", "otlp-json", "-o", str(target),
                                       "--db", url])  # fmt: skip
    assert done.exit_code == 0, done.output
    text = target.read_text(encoding="utf-8")
    return text, spans_of(decode_json(text))


def test_the_export_has_execute_tool_spans_for_calls_that_ran_and_approval_spans_for_all(
    run: ApprovalRun, tmp_path: Path
) -> None:
    _, spans = _export(run.url, tmp_path)
    (root,) = [span for span in spans if span.name.startswith("invoke_agent")]
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert {span.trace_id for span in spans} == {root.trace_id}  # one run, one trace
    tools = {span.attributes["gen_ai.tool.call.id"]: span for span in spans
             if span.attributes.get("gen_ai.operation.name") == "execute_tool"}  # fmt: skip
    assert set(tools) == {"look", "small", "ada"}  # large, eve and bob never ran
    assert all(span.parent == root.span_id for span in spans if span is not root)
    approvals = {span.attributes["gen_ai.tool.call.id"]: span for span in spans
                 if span.name.startswith("approval ")}  # fmt: skip
    assert set(approvals) == {"small", "large", "ada", "eve", "bob"}

    def decision(call: str) -> tuple[Any, ...]:
        attributes = approvals[call].attributes
        return (attributes["supervisor.approval.decision"],
                attributes.get("supervisor.approval.decided_by"),
                attributes["supervisor.approval.wait_ms"], approvals[call].status)  # fmt: skip

    assert decision("ada") == ("approved", "operator@example.com", 5_000, 1)
    assert decision("eve") == ("rejected", "lead@example.com", 10_000, 2)
    assert decision("bob") == ("expired", None, 60_000, 2)
    assert decision("small") == ("approved", "rule small refunds (policy v1)", 0, 1)
    assert decision("large") == ("rejected", "rule large refunds (policy v1)", 0, 2)

    ada = approvals["ada"]
    assert ada.name == "approval create_customer"
    assert ada.attributes["gen_ai.tool.name"] == "create_customer"
    assert ada.attributes["supervisor.proposal.id"] == run.ids["ada"]
    assert ada.attributes["supervisor.approval.via"] == "sdk"
    assert ada.attributes["supervisor.approval.reason"] == "checked"
    assert ada.duration_ms == 5_000
    assert tools["ada"].start >= ada.end  # it ran after the approval, linked to it
    assert tools["ada"].links == [ada.span_id]
    assert tools["ada"].attributes["supervisor.proposal.id"] == run.ids["ada"]
    assert [name for name, _, _ in ada.events] == ["proposed", "approved"]
    assert approvals["large"].attributes["supervisor.approval.rule"] == "large refunds"
    assert approvals["large"].attributes["supervisor.policy.version"] == 1
    assert approvals["bob"].message == "expired: the call did not run"
    assert approvals["bob"].events[-1][0] == "expired"
    assert root.start <= min(span.start for span in spans)
    assert root.end >= max(span.end for span in spans)


def test_untrusted_reasons_are_escaped_in_the_file_and_exact_when_decoded(
    run: ApprovalRun, tmp_path: Path
) -> None:
    text, spans = _export(run.url, tmp_path)
    for char in ("\u202e", "\x1b", "\x07", "\x9b"):
        assert char not in text, f"raw U+{ord(char):04X} in the export"
    reasons = {
        span.attributes["gen_ai.tool.call.id"]: span.attributes.get("supervisor.approval.reason")
        for span in spans
        if span.name.startswith("approval ")
    }
    assert reasons["eve"] == "duplicate " + HOSTILE
    assert reasons["large"] == "Large refunds go to the desk " + HOSTILE
    for value in ARGUMENT_VALUES:
        assert value not in text  # argument values are never exported; the hash is
    hashes = {span.attributes.get("supervisor.proposal.args_hash") for span in spans}
    assert all(len(str(value)) == 64 for value in hashes - {None})


def test_the_protobuf_encoding_is_what_the_official_classes_read_from_the_json(
    run: ApprovalRun,
) -> None:
    with SQLModelProvider(run.url) as provider:
        ledger = provider.ledger
        document = otlp_document(ledger.trace_events(limit=1000), iter_approval_facts(ledger))
    from_json = decode_json(json.dumps(document))
    from_bytes = ExportTraceServiceRequest.FromString(encode_trace_request(document))
    assert from_bytes == from_json
    assert (
        len(spans_of(from_bytes)) == len(document_spans(document)) == 1 + 3 + 5 + 2
    )  # root, tools, approvals, chats
