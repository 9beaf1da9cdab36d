"""``supervisor traces push`` against a real OTLP/HTTP receiver on 127.0.0.1 that decodes each
body with the official OpenTelemetry classes: the spans arrive, retries follow the OTLP rules
(429/502/503/504 and connection errors, never 400 or 500), failures are typed errors that name
the URL, and credentials never reach the output."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.approval_run import ApprovalRun, approval_run
from support.cli import run_cli
from support.otlp import OtlpReceiver, Span

from supervisor.analysis.approvals import iter_approval_facts
from supervisor.analysis.otlp import otlp_document
from supervisor.analysis.otlp_push import (
    Collector,
    CollectorRefused,
    CollectorUnreachable,
    InvalidCollectorUrl,
    push_document,
)
from supervisor.cli.traces import traces
from supervisor.store.provider import SQLModelProvider

TOKEN = "Bearer tok-9f8e7d6c5b4a"


@pytest.fixture
def run(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ApprovalRun:
    monkeypatch.setenv("SIDE_EFFECT_FILE", str(tmp_path / "side_effects.log"))
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return approval_run(sqlite_url)


def _by_call(spans: list[Span], prefix: str) -> dict[str, Span]:
    return {str(span.attributes.get("gen_ai.tool.call.id")): span for span in spans
            if span.name.startswith(prefix)}  # fmt: skip


def _document(url: str) -> dict[str, object]:
    with SQLModelProvider(url) as provider:
        ledger = provider.ledger
        return otlp_document(ledger.trace_events(limit=1000), iter_approval_facts(ledger))


@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json"])
def test_push_sends_every_span_to_v1_traces_with_the_headers(
    run: ApprovalRun, protocol: str
) -> None:
    with OtlpReceiver() as receiver:
        done = CliRunner().invoke(traces, [
            "push", receiver.url, "--header", f"Authorization={TOKEN}", "-H", "X-Tenant=ops",
            "--protocol", protocol, "--db", run.url,
        ])  # fmt: skip
    assert done.exit_code == 0, done.output
    (request,) = receiver.received
    assert request.path == "/v1/traces"
    assert request.content_type == (
        "application/x-protobuf" if protocol == "http/protobuf" else "application/json"
    )
    assert request.headers["authorization"] == TOKEN and request.headers["x-tenant"] == "ops"
    spans = receiver.spans()
    assert done.output == f"pushed {len(spans)} spans to {receiver.url}/v1/traces\n"
    assert TOKEN not in done.output
    tools, approvals = _by_call(spans, "execute_tool "), _by_call(spans, "approval ")
    assert set(tools) == {"look", "small", "ada"}
    decisions = {call: span.attributes["supervisor.approval.decision"]
                 for call, span in approvals.items()}  # fmt: skip
    assert decisions == {"small": "approved", "large": "rejected", "ada": "approved",
                         "eve": "rejected", "bob": "expired"}  # fmt: skip
    assert approvals["bob"].attributes["supervisor.approval.wait_ms"] == 60_000
    (root,) = [span for span in spans if span.name == "invoke_agent crm-agent"]
    assert approvals["eve"].parent == root.span_id
    assert tools["ada"].links == [approvals["ada"].span_id]


def test_retryable_answers_are_retried_with_backoff_then_the_push_succeeds(
    run: ApprovalRun,
) -> None:
    waits: list[float] = []
    with OtlpReceiver(statuses=[503, 429]) as receiver:
        collector = Collector.parse(receiver.url + "/custom/path")
        report = push_document(_document(run.url), collector, sleep=waits.append)
    assert [item.path for item in receiver.received] == ["/custom/path"] * 3  # path as given
    assert waits == [0.5, 0.0]  # the backoff, then the collector's Retry-After: 0
    assert report.requests == 1 and report.spans == len(receiver.spans()) > 0


@pytest.mark.parametrize("status", [400, 500])
def test_a_refusal_is_not_retried_and_exits_2_naming_the_url(run: ApprovalRun, status: int) -> None:
    with OtlpReceiver(statuses=[status]) as receiver:
        url = receiver.url.replace("http://", "http://alice:pw-77x@")
        result = run_cli("traces", "push", url, "-H", f"Authorization={TOKEN}", "--db", run.url)
    assert len(receiver.received) == 1  # never retried
    assert receiver.received[0].headers["authorization"] == TOKEN  # --header wins
    assert result.returncode == 2
    first, hint = result.stderr.splitlines()
    assert first.startswith(f"error [otlp_export_refused]: The OTLP collector at "
                            f"{receiver.url}/v1/traces answered HTTP {status}")  # fmt: skip
    assert "0 of 11 spans were sent" in first
    assert "\x1b" not in result.stderr and "\\u001b[2J" in first  # its body, escaped
    assert "traces export --format otlp-json" in hint
    for secret in (TOKEN, "pw-77x", "alice"):
        assert secret not in result.stdout + result.stderr


def test_an_unreachable_collector_is_retried_then_a_typed_error(run: ApprovalRun) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    waits: list[float] = []
    with pytest.raises(CollectorUnreachable) as caught:
        push_document(_document(run.url), Collector.parse(f"http://127.0.0.1:{port}"),
                      sleep=waits.append)  # fmt: skip
    assert waits == [0.5, 1.0]
    error = caught.value
    assert error.code == "otlp_collector_unreachable"
    assert f"http://127.0.0.1:{port}/v1/traces" in error.message
    assert "after 3 attempts; 0 of 11 spans were sent" in error.message
    shown = run_cli("traces", "push", f"http://127.0.0.1:{port}", "--db", run.url)
    assert shown.returncode == 2
    assert shown.stderr.startswith("error [otlp_collector_unreachable]: Could not reach")


def test_the_standard_variables_give_the_endpoint_and_headers(
    run: ApprovalRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OtlpReceiver(partial=(2, "two spans dropped")) as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url + "/base/")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=abc%20def, x-other=1")
        done = CliRunner().invoke(traces, ["push", "--db", run.url])
    assert done.exit_code == 0, done.output
    (request,) = receiver.received
    assert request.path == "/base/v1/traces"
    assert request.headers["x-api-key"] == "abc def" and request.headers["x-other"] == "1"
    assert "abc" not in done.output
    assert "warning [otlp_spans_rejected]: the collector rejected 2 of them: two spans dropped" in (
        done.stderr
    )


def test_bad_urls_and_headers_are_refused_before_anything_is_sent(run: ApprovalRun) -> None:
    for url in ("ftp://collector:4318", "http://", "localhost:4318"):
        with pytest.raises(InvalidCollectorUrl):
            Collector.parse(url)
    runner = CliRunner()
    bad = runner.invoke(traces, ["push", "http://127.0.0.1:9", "-H", "Authorization", "--db",
                                 run.url])  # fmt: skip
    assert bad.exit_code == 2 and "NAME=VALUE" in bad.output
    split = runner.invoke(traces, ["push", "http://127.0.0.1:9", "-H", "X=a\r\nInjected: 1",
                                   "--db", run.url])  # fmt: skip
    assert split.exit_code == 2 and "control character" in split.output
    assert "Injected" not in split.output
    with OtlpReceiver() as elsewhere, OtlpReceiver(statuses=[302]) as receiver:
        receiver.location = elsewhere.url + "/v1/traces"
        collector = Collector.parse(receiver.url, {"Authorization": TOKEN})
        with pytest.raises(CollectorRefused) as caught:
            push_document(_document(run.url), collector, sleep=lambda _: None)
    assert caught.value.details["status"] == 302 and len(receiver.received) == 1
    assert elsewhere.received == []  # the credentials never went to the other origin
    assert "Redirects are not followed" in (caught.value.hint or "")
