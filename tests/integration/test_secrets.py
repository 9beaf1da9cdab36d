"""Secrets stay out of the saved config, the logs, the traces and the exports.

A real scripted model server on loopback, a real SQLite ledger, logging captured at DEBUG for
every logger the agent process has (``openai``, ``httpx``/``httpx2``, ``httpcore``...).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated, Any, ClassVar
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from sandboxes.browser import BrowserTask
from sandboxes.browser.config import SENSITIVE_DATA_ENV
from sandboxes.browser.gate import ApprovalGate
from sandboxes.browser.targets import ResolvedAction
from sandboxes.browser.worker import open_worker_provider, take_sensitive_data
from supervisor import MemAgent, MemAgentBuilder, Secret, governed_tool
from supervisor.analysis.export import export_jsonl, export_otlp_json
from supervisor.cli.traces import traces
from supervisor.ledger.models import TraceEvent
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall, Turn, llm_config

PASSWORD = "Pw-userinfo-7Hq2"
QUERY_TOKEN = "qtok-Zr81Lm0Vx4"
SERVER_LOGGERS = ("supervisor.testing.",)  # the endpoint's own access log


def _everything_exported(ledger: ApprovalLedger) -> str:
    """The ledger's trace events as stored, as JSONL and as OTLP/JSON, in one text."""
    events = ledger.trace_events(limit=10_000)
    jsonl, otlp = io.StringIO(), io.StringIO()
    export_jsonl(events, jsonl)
    export_otlp_json(events, otlp)
    stored = "\n".join(event.model_dump_json() for event in events)
    return "\n".join((stored, jsonl.getvalue(), otlp.getvalue()))


def _agent_log_messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if not record.name.startswith(SERVER_LOGGERS)
    ]


def test_base_url_credentials_are_not_saved_logged_or_traced(
    provider: SQLModelProvider, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)

    @governed_tool
    def fetch_report(name: str) -> dict[str, Any]:
        """Fetch a report from the upstream that shares the model's credentials."""
        raise RuntimeError(f"upstream refused {name}: token {QUERY_TOKEN} / {PASSWORD} expired")

    script: list[Turn] = [
        CallTools([ToolCall("fetch_report", {"name": "q3"})]),
        Reply("It failed."),
    ]
    with ScriptedModel(script * 2) as model:
        base_url = model.base_url.replace("http://", f"http://alice:{PASSWORD}@")
        base_url += f"?api-key={QUERY_TOKEN}"
        agent = (
            MemAgentBuilder()
            .with_agent_id("reports")
            .with_llm_config(llm_config(model, base_url=base_url))
            .with_tools([fetch_report])
            .with_memory_provider(provider)
            .build_and_save()
        )
        first = agent.run("Get the q3 report")
        # Another process would take the credentials from OPENAI_BASE_URL (same endpoint).
        monkeypatch.setenv("OPENAI_BASE_URL", base_url)
        loaded = MemAgent.load(
            "reports", memory_provider=provider, tools=[fetch_report], api_key="sk-scripted"
        )
        second = loaded.run("Again")

    assert (first.status, second.status) == ("completed", "completed")
    with provider.engine.connect() as connection:
        row = connection.execute(sa.text("SELECT config_json FROM agent")).scalar_one()
    assert PASSWORD not in row and QUERY_TOKEN not in row and "alice" not in row
    assert json.loads(row)["llm"]["base_url"] == model.base_url

    messages = _agent_log_messages(caplog)
    assert any("HTTP Request: POST" in message for message in messages)  # httpx did log
    assert not [m for m in messages if PASSWORD in m or QUERY_TOKEN in m]
    # ... while the endpoint itself received the token, from both processes' clients.
    received = [r.getMessage() for r in caplog.records if r.name.startswith(SERVER_LOGGERS)]
    assert sum(f"api-key={QUERY_TOKEN}" in message for message in received) == 4

    exported = _everything_exported(provider.ledger)
    assert "upstream refused q3" in exported
    assert PASSWORD not in exported and QUERY_TOKEN not in exported


class _CaptureHandler(BaseHTTPRequestHandler):
    """A minimal chat-completions endpoint that records what reached it."""

    seen: ClassVar[list[tuple[str, str | None]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.path, self.headers.get("Authorization")))
        body = json.dumps(
            {
                "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "ok"}}],
            }
        ).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_userinfo_and_query_still_reach_the_endpoint(provider: SQLModelProvider) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CaptureHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        agent = (
            MemAgentBuilder()
            .with_agent_id("capture")
            .with_llm_config(
                {
                    "provider": "openai",
                    "model": "m",
                    "api_key": "sk-unused",
                    "base_url": f"http://bob:{PASSWORD}@127.0.0.1:{port}/v1?api-key={QUERY_TOKEN}",
                }
            )
            .with_memory_provider(provider)
            .build()
        )
        assert agent.run("hi").status == "completed"
    finally:
        server.shutdown()
        server.server_close()
    import base64

    expected = "Basic " + base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
    assert _CaptureHandler.seen == [(f"/v1/chat/completions?api-key={QUERY_TOKEN}", expected)]


CONFIGURED_KEY = "tok3n-Zq9fLw0xVbN"  # matches no secret pattern
SECRET_ARGUMENT = "plum-Orchard-42"


def test_configured_key_and_secret_arguments_are_redacted_from_traces_and_exports(
    provider: SQLModelProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    @governed_tool
    def call_partner(account: str) -> dict[str, Any]:
        """Call the partner API with the same key as the model."""
        raise PermissionError(f"partner rejected key {CONFIGURED_KEY} for {account}")

    @governed_tool
    def login(user: str, password: Annotated[str, Secret]) -> dict[str, Any]:
        """Log in to the legacy portal.

        Args:
            user: Account name.
            password: The account's password.
        """
        raise ValueError(f"bad login {user}/{password}")

    assert "password" in login.parameters["properties"]  # the model's schema is unchanged
    script: list[Turn] = [
        CallTools([ToolCall("call_partner", {"account": "acme"})]),
        CallTools([ToolCall("login", {"user": "ada", "password": SECRET_ARGUMENT})]),
        Reply("Both failed."),
    ]
    with ScriptedModel(script, api_key=CONFIGURED_KEY) as model:
        config = {"provider": "openai", "model": model.model_name, "base_url": model.base_url,
                  "api_key": CONFIGURED_KEY}  # fmt: skip
        agent = (
            MemAgentBuilder()
            .with_agent_id("partner")
            .with_llm_config(config)
            .with_tools([call_partner, login])
            .with_memory_provider(provider)
            .build()
        )
        assert agent.run("Sync acme").status == "completed"

    exported = _everything_exported(provider.ledger)
    assert "partner rejected key" in exported and "bad login ada/" in exported
    assert CONFIGURED_KEY not in exported
    assert SECRET_ARGUMENT not in exported


SENSITIVE = "Sensitive-Pa55-word"


def test_browser_sensitive_data_stays_out_of_the_config_and_the_traces(
    provider: SQLModelProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = BrowserTask(
        "Log in", allowed_domains=["127.0.0.1:9"], ledger_url=provider.url,
        sensitive_data={"pw": SENSITIVE, "127.0.0.1:9": {"otp": "otp-Value-551"}},
    )  # fmt: skip
    assert SENSITIVE not in task.config.model_dump_json()
    assert SENSITIVE not in repr(task.config)

    # The worker process: its task passed sensitive_data by environment only.
    monkeypatch.setenv(SENSITIVE_DATA_ENV, json.dumps(task._sensitive_data))
    config = take_sensitive_data(task.config)
    assert config.sensitive_data["pw"] == SENSITIVE
    assert SENSITIVE_DATA_ENV not in __import__("os").environ  # Chromium never inherits it
    worker = open_worker_provider(config)
    try:
        gate = ApprovalGate(worker.ledger, config.policy, worker_id="browser-w1", owner="web")
        action = ResolvedAction(
            action_name="input", tool_name="browser.input", schema_hash="0" * 64,
            arguments={"index": 3, "text": "<secret>pw</secret>"},
            execution_target={"browser": "browser-w1", "url": "http://127.0.0.1:9/login"},
            page_url="http://127.0.0.1:9/login",
        )  # fmt: skip
        error = f"could not type {SENSITIVE} into element 3 (otp otp-Value-551)"
        asyncio.run(gate._trace(action, "failed", f"typed {SENSITIVE}", error))
    finally:
        worker.close()

    exported = _everything_exported(provider.ledger)
    assert "could not type" in exported and "<secret>pw</secret>" in exported
    assert SENSITIVE not in exported and "otp-Value-551" not in exported


def test_an_unusable_base_url_is_a_typed_error_that_does_not_echo_it() -> None:
    from supervisor.runtime.errors import ModelConfigError

    with pytest.raises(ModelConfigError) as caught:
        MemAgentBuilder().with_llm_config(
            {"provider": "openai", "model": "m", "base_url": f"http://u:{PASSWORD}@h:port/v1"}
        )
    assert caught.value.code == "model_config_invalid"
    assert PASSWORD not in str(caught.value) and "base_url" in str(caught.value)


# Both quote kinds, a space and non-ASCII: its repr, JSON and URL forms all differ from it.
ENCODED_SECRET = "Zk'9\"wö rd-Q7x"


def test_secret_arguments_are_redacted_from_traces_in_their_encoded_forms(
    provider: SQLModelProvider,
) -> None:
    @governed_tool
    def login(user: str, password: Annotated[str, Secret]) -> dict[str, Any]:
        """Log in to the legacy portal.

        Args:
            user: Account name.
            password: The account's password.
        """
        raise ValueError(f"bad login {password!r} {json.dumps(password)} {quote(password)}")

    @governed_tool
    def connect(host: str, credentials: Annotated[dict[str, str], Secret]) -> dict[str, Any]:
        """Connect to a partner host.

        Args:
            host: The host.
            credentials: User name and password.
        """
        raise ConnectionError(f"{host} refused password {credentials['password']!r}")

    script: list[Turn] = [
        CallTools([ToolCall("login", {"user": "ada", "password": ENCODED_SECRET})]),
        CallTools(
            [
                ToolCall(
                    "connect",
                    {"host": "crm", "credentials": {"user": "ada", "password": ENCODED_SECRET}},
                )
            ]
        ),
        Reply("Both failed."),
    ]
    with ScriptedModel(script) as model:
        agent = (
            MemAgentBuilder()
            .with_agent_id("portal")
            .with_llm_config(llm_config(model))
            .with_tools([login, connect])
            .with_memory_provider(provider)
            .build()
        )
        assert agent.run("Log in").status == "completed"

    exported = _everything_exported(provider.ledger)
    assert "Q7x" not in exported and "Zk" not in exported
    assert "bad login '[REDACTED]' \"[REDACTED]\" [REDACTED]" in exported.replace("\\", "")
    assert "crm refused password" in exported


SK_KEY = "sk-live1234567890abcdef"  # found by its shape, known to no process
KNOWN_VALUE = "Kn0wn 'Välue'-Q7x"  # known to the writing process, of no recognisable shape


def _event_with_everywhere(secret: str) -> TraceEvent:
    """A trace event holding ``secret`` in every string field and in a payload key."""
    return TraceEvent(
        at=datetime.now(UTC), agent_id=f"ag-{secret}", thread_id=f"th-{secret}",
        run_id=f"run-{secret}", kind="tool_result", tool=f"tool-{secret}",
        outcome_status=f"st-{secret}", reason_code=f"rc-{secret}", blob_ref=f"b-{secret}",
        payload={f"k-{secret}": f"v {secret}", "nested": [{f"n-{secret}": {"x": secret}}]},
    )  # fmt: skip


def test_every_string_of_a_trace_event_is_redacted_when_written(
    provider: SQLModelProvider,
) -> None:
    provider.trace_secrets.add(KNOWN_VALUE)
    provider.ledger.append_trace([_event_with_everywhere(KNOWN_VALUE)])
    provider.ledger.append_trace([_event_with_everywhere(quote(KNOWN_VALUE))])  # as in a URL

    with provider.engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT * FROM trace_event")).mappings().all()
    stored = json.dumps([dict(row) for row in rows], default=str)
    assert "Q7x" not in stored
    (first, _) = provider.ledger.trace_events()
    assert first.agent_id == "ag-[REDACTED]" and first.blob_ref == "b-[REDACTED]"
    assert first.payload == {
        "k-[REDACTED]": "v [REDACTED]",
        "nested": [{"n-[REDACTED]": {"x": "[REDACTED]"}}],
    }


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["export"], id="export-jsonl"),
        pytest.param(["export", "--format", "otlp-json"], id="export-otlp"),
        pytest.param(["tail", "--json"], id="tail-json"),
        pytest.param(["tail"], id="tail"),
    ],
)
def test_exports_and_tail_redact_every_string_of_a_trace_event(
    provider: SQLModelProvider, command: list[str]
) -> None:
    provider.ledger.append_trace([_event_with_everywhere(SK_KEY)])  # no process knew it
    shown = CliRunner().invoke(traces, [*command, "--db", provider.url])

    assert shown.exit_code == 0, shown.output
    assert "tool-[REDACTED]" in shown.stdout
    assert SK_KEY not in shown.stdout and "1234567890abcdef" not in shown.stdout
