"""The durable mutation gate over a real MCP server (the ``mcp`` SDK, stdio subprocess)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.mcp_agent_proc import AGENT_ID, SERVER_SCRIPT

from supervisor import MemAgent, MemAgentBuilder, SQLModelProvider
from supervisor.mcp import close_mcp_tools, mcp_server
from supervisor.mcp.connection import McpCallResult, McpToolSpec
from supervisor.mcp.tool import IDEMPOTENCY_META_KEY, McpTool
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall, Turn

TESTS_DIR = Path(__file__).resolve().parents[1]
ORDER = {"sku": "A-1", "quantity": 2}


@pytest.fixture
def count_file(tmp_path: Path) -> Path:
    return tmp_path / "mcp_calls.jsonl"


def _calls(count_file: Path, tool: str = "create_order") -> list[dict[str, Any]]:
    if not count_file.exists():
        return []
    lines = [json.loads(line) for line in count_file.read_text().splitlines()]
    return [line for line in lines if line["tool"] == tool]


def _agent(
    model: ScriptedModel,
    provider: SQLModelProvider,
    count_file: Path,
    *,
    trust: str = "untrusted",
    variant: str = "1",
) -> MemAgent:
    return (
        MemAgentBuilder()
        .with_agent_id(AGENT_ID)
        .with_llm_config(
            {
                "provider": "openai",
                "model": "scripted-model",
                "base_url": model.base_url,
                "api_key": "sk-test",
            }
        )
        .with_memory_provider(provider)
        .with_mcp_server(
            "inv",
            command=[sys.executable, SERVER_SCRIPT],
            trust=trust,  # type: ignore[arg-type]
            env={"MCP_COUNT_FILE": str(count_file), "MCP_SCHEMA_VARIANT": variant},
        )
        .build()
    )


def test_tools_are_exposed_with_server_prefix_identity_and_policy(
    provider: SQLModelProvider, count_file: Path
) -> None:
    with ScriptedModel([Reply("hi")]) as model:
        untrusted = _agent(model, provider, count_file)
        trusted = _agent(model, provider, count_file, trust="trusted")
    try:
        assert sorted(untrusted.tools.names()) == [
            "inv__confirm_delete", "inv__create_order", "inv__lookup",
        ]  # fmt: skip
        lookup = untrusted.tools.get("inv__lookup")
        assert lookup.policy.requires_approval  # untrusted: read-only hint is not believed
        assert not trusted.tools.get("inv__lookup").policy.requires_approval
        assert trusted.tools.get("inv__create_order").policy.requires_approval
        order = trusted.tools.get("inv__create_order")
        assert order.parameters["additionalProperties"] is False
        assert order.execution_target is not None
        assert order.execution_target["mcp_server"] == "inv"
        assert order.execution_target["tool"] == "create_order"
        assert order.schema_hash == untrusted.tools.get("inv__create_order").schema_hash
        records = {record.name: record for record in provider.ledger.list_tools(AGENT_ID)}
        assert records["inv__create_order"].schema_hash == order.schema_hash
    finally:
        close_mcp_tools(untrusted.tools)
        close_mcp_tools(trusted.tools)


def test_read_runs_mutation_pauses_and_runs_once_after_approval(
    provider: SQLModelProvider, count_file: Path
) -> None:
    script: list[Turn] = [
        CallTools([ToolCall("inv__lookup", {"sku": "A-1"})]),
        CallTools([ToolCall("inv__create_order", ORDER)]),
        Reply("Ordered."),
    ]
    with ScriptedModel(script) as model:
        agent = _agent(model, provider, count_file, trust="trusted")
        try:
            result = agent.run("Order two A-1 if in stock")
            assert result.status == "awaiting_approval"
            assert agent.last_tool_outcomes[0]["tool_name"] == "inv__lookup"
            assert agent.last_tool_outcomes[0]["status"] == "success"
            assert _calls(count_file) == []
            (proposal,) = result.proposals
            assert proposal.tool_name == "inv__create_order"
            assert proposal.arguments == ORDER
            assert proposal.execution_target["mcp_server"] == "inv"
            agent.approve(proposal.proposal_id, "operator@example.com", "reviewed")
            resumed = agent.resume_approval(proposal.proposal_id, continue_model=True)
            assert resumed.consumed and resumed.ok
            assert resumed.tool_result == {"order": "order-A-1-2"}
            assert resumed.assistant_response == "Ordered."
            again = agent.resume_approval(proposal.proposal_id)
            assert again.error_code == "already_consumed"
        finally:
            close_mcp_tools(agent.tools)
    calls = _calls(count_file)
    assert len(calls) == 1
    assert calls[0]["key"] == proposal.proposal_id  # the idempotency key travelled in _meta


def test_sigkill_after_approval_then_resume_in_new_processes_runs_once(
    sqlite_url: str, count_file: Path
) -> None:
    with ScriptedModel([CallTools([ToolCall("inv__create_order", ORDER)])]) as model:
        env = {**os.environ, **model.env(), "SUPERVISOR_DB": sqlite_url,
               "MCP_COUNT_FILE": str(count_file), "PYTHONPATH": str(TESTS_DIR)}  # fmt: skip
        agent_process = subprocess.Popen(
            [sys.executable, "-m", "support.mcp_agent_proc", "pause", "Order two A-1"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert agent_process.stdout is not None
        line = agent_process.stdout.readline()
        assert line, agent_process.stderr.read() if agent_process.stderr else ""
        (proposal_id,) = json.loads(line)
        ledger = SQLModelProvider(sqlite_url)
        try:
            ledger.ledger.approve(proposal_id, "operator@example.com", "reviewed")
            os.kill(agent_process.pid, signal.SIGKILL)
            agent_process.wait(timeout=30)
            assert agent_process.returncode == -signal.SIGKILL
            assert _calls(count_file) == []

            def run(*args: str) -> dict[str, Any]:
                done = subprocess.run(
                    [sys.executable, "-m", "support.mcp_agent_proc", *args],
                    env=env, capture_output=True, text=True, timeout=120,
                )  # fmt: skip
                assert done.returncode == 0, done.stderr
                parsed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
                return parsed

            first = run("resume", proposal_id)
            assert first["consumed"] is True and first["ok"] is True
            assert first["tool_result"] == {"order": "order-A-1-2"}
            second = run("resume-load", proposal_id)
            assert second["error_code"] == "already_consumed"
            assert ledger.ledger.get(proposal_id).status.value == "executed"
        finally:
            ledger.close()
    calls = _calls(count_file)
    assert len(calls) == 1
    assert calls[0]["key"] == proposal_id


def test_pending_call_resumes_in_a_process_that_loads_the_agent(
    sqlite_url: str, count_file: Path
) -> None:
    with ScriptedModel([CallTools([ToolCall("inv__create_order", ORDER)])]) as model:
        env = {**os.environ, **model.env(), "SUPERVISOR_DB": sqlite_url,
               "MCP_COUNT_FILE": str(count_file), "PYTHONPATH": str(TESTS_DIR)}  # fmt: skip
        pauser = subprocess.Popen(
            [sys.executable, "-m", "support.mcp_agent_proc", "pause", "Order"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert pauser.stdout is not None
        (proposal_id,) = json.loads(pauser.stdout.readline())
        pauser.kill()
        pauser.wait(timeout=30)
        provider = SQLModelProvider(sqlite_url)
        try:
            provider.ledger.approve(proposal_id, "operator@example.com", "reviewed")
        finally:
            provider.close()
        done = subprocess.run(
            [sys.executable, "-m", "support.mcp_agent_proc", "resume-load", proposal_id],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.strip().splitlines()[-1])["ok"] is True
    assert len(_calls(count_file)) == 1


def test_changed_schema_invalidates_standing_grants_and_is_traced(
    provider: SQLModelProvider, count_file: Path
) -> None:
    script = [
        CallTools([ToolCall("inv__create_order", ORDER, id="c1")]),
    ]
    with ScriptedModel(script) as model:
        agent = _agent(model, provider, count_file)
        try:
            (approved,) = agent.run("Order", thread_id="t1").proposals
        finally:
            close_mcp_tools(agent.tools)
    old_hash = approved.tool_schema_hash
    ledger = provider.ledger
    ledger.approve(approved.proposal_id, "operator@example.com", "reviewed")
    pending = ledger.propose(
        "inv__create_order", old_hash, {"sku": "B-2", "quantity": 1},
        execution_target=approved.execution_target, owner=AGENT_ID,
    )  # fmt: skip
    similar = ledger.propose(
        "inv__create_order", old_hash, {"sku": "C-3", "quantity": 1},
        execution_target=approved.execution_target, owner=AGENT_ID,
    )  # fmt: skip
    granted, grant = ledger.approve_similar(
        similar.proposal_id, "operator@example.com", patterns={"quantity": {"range": [1, 9]}}
    )
    with ScriptedModel([Reply("unused")]) as model:
        changed = _agent(model, provider, count_file, variant="2")
        try:
            new_tool = changed.tools.get("inv__create_order")
            assert new_tool.schema_hash != old_hash
            assert "priority" in new_tool.parameters["properties"]
            revoked = ledger.get(approved.proposal_id)
            cancelled = ledger.get(pending.proposal_id)
            assert revoked.status.value == "cancelled"
            assert cancelled.status.value == "cancelled"
            assert revoked.decision_reason is not None
            assert "changed its contract" in revoked.decision_reason
            events = ledger.trace_events(agent_id=AGENT_ID, kind="tool_schema_changed")
            assert len(events) == 1
            assert events[0].tool == "inv__create_order"
            assert events[0].reason_code == "mcp_schema_changed"
            assert events[0].payload["old_schema_hash"] == old_hash
            assert events[0].payload["new_schema_hash"] == new_tool.schema_hash
            assert set(events[0].payload["invalidated_proposals"]) == {
                approved.proposal_id, pending.proposal_id, granted.proposal_id,
                f"grant:{grant.grant_id}",
            }  # fmt: skip
            dead = ledger.grant(grant.grant_id)
            assert dead.revoked_at is not None and "changed its contract" in (
                dead.revoke_reason or ""
            )
            resumed = changed.resume_approval(approved.proposal_id)
            assert resumed.error_code == "cancelled"
            registry = {record.name: record for record in ledger.list_tools(AGENT_ID)}
            assert registry["inv__create_order"].schema_hash == new_tool.schema_hash
        finally:
            close_mcp_tools(changed.tools)
    assert _calls(count_file) == []


def test_elicitation_is_declined_and_never_counts_as_approval(
    provider: SQLModelProvider, count_file: Path
) -> None:
    script = [CallTools([ToolCall("inv__confirm_delete", {"path": "/records/7"})])]
    with ScriptedModel(script) as model:
        agent = _agent(model, provider, count_file, trust="trusted")
        try:
            result = agent.run("Delete record 7")
            assert result.status == "awaiting_approval"  # the server's question changes nothing
            (proposal,) = result.proposals
            assert _calls(count_file, "confirm_delete") == []
            agent.approve(proposal.proposal_id, "operator@example.com", "reviewed")
            resumed = agent.resume_approval(proposal.proposal_id)
            assert resumed.tool_result == {"deleted": None, "elicitation": "decline"}
        finally:
            close_mcp_tools(agent.tools)
    (call,) = _calls(count_file, "confirm_delete")
    assert call["deleted"] is False and call["action"] == "decline"
    (event,) = provider.ledger.trace_events(agent_id=AGENT_ID, kind="mcp_elicitation")
    assert event.outcome_status == "declined"
    assert event.tool == "inv__confirm_delete"
    assert event.payload["requested_fields"] == ["confirm"]


def test_arguments_are_validated_strictly_before_anything_is_proposed(
    provider: SQLModelProvider, count_file: Path
) -> None:
    with ScriptedModel([Reply("unused")]) as model:
        agent = _agent(model, provider, count_file, trust="trusted")
    try:
        order = agent.tools.get("inv__create_order")
        cases: dict[str, dict[str, Any]] = {
            "unknown_argument": {**ORDER, "bogus": 1},
            "reserved_argument": {**ORDER, "approved": True},
            "missing_argument": {"sku": "A-1"},
            "invalid_arguments": {"sku": "A-1", "quantity": "2"},
        }
        for code, arguments in cases.items():
            refused = order.dispatch(arguments, approved=True)
            assert refused.error is not None and refused.error.code == code, code
        unapproved = order.dispatch(ORDER)
        assert unapproved.error is not None and unapproved.error.code == "approval_required"
        assert order.dispatch("{not json").error.code == "invalid_json"  # type: ignore[union-attr]
        lookup = agent.tools.get("inv__lookup")
        assert lookup.dispatch({"sku": "A-1"}).value == {"sku": "A-1", "available": 12}
    finally:
        close_mcp_tools(agent.tools)
    assert _calls(count_file) == []


class _ChangingServer:
    """A caller whose listing changed after the tool was built; it records every call."""

    def __init__(self, spec: McpToolSpec) -> None:
        self.spec = spec
        self.calls: list[dict[str, Any]] = []

    def list_tools(self) -> list[McpToolSpec]:
        schema = dict(self.spec.input_schema)
        schema["properties"] = {**schema["properties"], "extra": {"type": "string"}}
        return [McpToolSpec(self.spec.name, "", schema, False)]

    def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> McpCallResult:
        self.calls.append({"name": name, "meta": meta})
        return McpCallResult({"ok": True}, (), (), False)


def test_a_contract_changed_after_approval_is_refused_at_call_time() -> None:
    spec = McpToolSpec(
        "create_order", "Create an order.",
        {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}, False,
    )  # fmt: skip
    server = _ChangingServer(spec)
    tool = McpTool(server, mcp_server("inv", command=["unused"]), spec)
    result = tool.dispatch({"sku": "A"}, approved=True)
    assert result.outcome.reason_code == "mcp_schema_changed"
    assert result.value["error"]["code"] == "mcp_schema_changed"
    assert server.calls == []


def test_mutating_call_carries_an_idempotency_key_without_a_ledger() -> None:
    spec = McpToolSpec(
        "create_order", "", {"type": "object", "properties": {"sku": {"type": "string"}}}, False
    )

    class _Stable(_ChangingServer):
        def list_tools(self) -> list[McpToolSpec]:
            return [self.spec]

    server = _Stable(spec)
    tool = McpTool(server, mcp_server("inv", command=["unused"]), spec)
    assert tool.dispatch({"sku": "A"}, approved=True).ok
    (call,) = server.calls
    assert call["meta"][IDEMPOTENCY_META_KEY] == call["meta"]["supervisor/args_hash"]


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_streamable_http_server_is_gated_the_same_way(
    provider: SQLModelProvider, count_file: Path
) -> None:
    import time

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, SERVER_SCRIPT, "http", str(port)],
        env={**os.environ, "MCP_COUNT_FILE": str(count_file)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        import socket

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        script: list[Turn] = [CallTools([ToolCall("web__create_order", ORDER)])]
        with ScriptedModel(script) as model:
            agent = (
                MemAgentBuilder()
                .with_agent_id("http-agent")
                .with_llm_config(
                    {
                        "provider": "openai",
                        "model": "m",
                        "base_url": model.base_url,
                        "api_key": "sk-test",
                    }
                )
                .with_memory_provider(provider)
                .with_mcp_server("web", url=f"http://127.0.0.1:{port}/mcp", trust="trusted")
                .build()
            )
            try:
                assert agent.tools.get("web__create_order").execution_target == {
                    "mcp_server": "web", "tool": "create_order", "transport": "streamable_http",
                    "endpoint_sha256": mcp_server("web", url=f"http://127.0.0.1:{port}/mcp")
                    .endpoint_fingerprint(),
                }  # fmt: skip
                assert agent.tools.get("web__lookup").dispatch({"sku": "Z"}).ok
                (proposal,) = agent.run("Order").proposals
                assert _calls(count_file) == []
                agent.approve(proposal.proposal_id, "operator@example.com")
                assert agent.resume_approval(proposal.proposal_id).ok
                assert agent.resume_approval(proposal.proposal_id).error_code == (
                    "already_consumed"
                )
            finally:
                close_mcp_tools(agent.tools)
    finally:
        server.terminate()
        server.wait(timeout=30)
    (call,) = _calls(count_file)
    assert call["key"] == proposal.proposal_id


def test_an_edited_mcp_call_runs_the_edit_once_with_its_own_idempotency_key(
    provider: SQLModelProvider, count_file: Path
) -> None:
    from support.cli import run_cli

    script: list[Turn] = [CallTools([ToolCall("inv__create_order", ORDER)]), Reply("Ordered.")]
    db = ["--db", provider.url]
    with ScriptedModel(script) as model:
        agent = _agent(model, provider, count_file, trust="trusted")
        try:
            (original,) = agent.run("Order two A-1").proposals
            # The registry holds the MCP tool's schema, so the CLI checks an edit against it.
            bad = run_cli(
                "proposals", "edit", original.proposal_id, "--set", 'quantity="lots"', *db
            )
            assert bad.returncode == 2 and bad.stderr.startswith("error [invalid_edit]")
            edit = run_cli(
                "proposals", "edit", original.proposal_id, "--set", "quantity=5", "--json", *db
            )
            assert edit.returncode == 0, edit.stderr
            edited_id = json.loads(edit.stdout)["proposal_id"]
            approve = run_cli("proposals", "approve", edited_id, *db)
            assert approve.returncode == 0, approve.stderr
            # Any resumer may start from the id it knows: the chain leads to the approved edit.
            resumed = agent.resume_approval(original.proposal_id, continue_model=True)
            assert (resumed.proposal.proposal_id, resumed.consumed, resumed.ok) == (
                edited_id, True, True,
            )  # fmt: skip
            assert resumed.assistant_response == "Ordered."
            tool_message = json.loads(model.requests[-1].messages[-1]["content"])
        finally:
            close_mcp_tools(agent.tools)
    calls = _calls(count_file)
    assert [(c["sku"], c["quantity"], c["key"]) for c in calls] == [("A-1", 5, edited_id)]
    assert tool_message["edited_by_human"]["changed"] == [
        {"path": "$.quantity", "old": 2, "new": 5}
    ]
    assert tool_message["result"] == {"order": "order-A-1-5"}
