"""A call to a tool that does not exist leaves its result in the trace, like any other call:
the model is told ``unknown_tool``, and the trace (the ledger, `supervisor traces tail`) shows
the call and its refusal, with the name shown literally."""

from __future__ import annotations

from support.agents import inventory_lookup
from support.cli import run_cli

from supervisor import ContextPolicy, MemAgentBuilder, SQLModelProvider, Toolbox
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall, llm_config

_HOSTILE = "wipe\u202edisk"


def test_unknown_tools_leave_a_result_in_the_trace(
    provider: SQLModelProvider, sqlite_url: str
) -> None:
    calls = [
        ToolCall(_HOSTILE, {"a": 1}, id="c-plain"),
        ToolCall("invoke_tool", {"handle": "zzz", "arguments": {}}, id="c-handle"),
    ]
    with ScriptedModel([CallTools(calls), Reply("done")]) as model:
        agent = (
            MemAgentBuilder()
            .with_llm_config(llm_config(model))
            .with_memory_provider(provider)
            .with_toolbox(Toolbox.from_functions([inventory_lookup]))
            .with_context_policy(ContextPolicy(tool_top_k=2))
            .build()
        )
        result = agent.run("hi")
        told = [m["content"] for m in model.requests[1].messages if m["role"] == "tool"]
    assert result.status == "completed"
    assert [(o["tool_name"], o["reason_code"]) for o in result.outcomes] == [
        (_HOSTILE, "unknown_tool"),
        ("invoke_tool", "unknown_tool_handle"),
    ]
    assert '"unknown_tool"' in told[0] and '"unknown_tool_handle"' in told[1]
    results = provider.ledger.trace_events(kind="tool_result")
    assert [(e.tool, e.outcome_status, e.reason_code, e.payload["call_id"]) for e in results] == [
        (_HOSTILE, "error", "unknown_tool", "c-plain"),
        ("invoke_tool", "error", "unknown_tool_handle", "c-handle"),
    ]
    tail = run_cli("traces", "tail", "--db", sqlite_url)
    assert tail.returncode == 0, tail.stderr
    refused = [line for line in tail.stdout.splitlines() if "unknown_tool" in line]
    assert len(refused) == 2, tail.stdout
    assert "wipe\\u202edisk" in tail.stdout and "\u202e" not in tail.stdout
