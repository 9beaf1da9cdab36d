"""A huge tool result never reaches the model or a checkpoint whole, with default settings.

A real scripted model server and a real SQLite ledger; the tool returns 50 MB of JSON text.
"""

from __future__ import annotations

import json
from typing import Any

from supervisor import MemAgentBuilder, ToolResultPolicy, governed_tool
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall, Turn, llm_config

HUGE_CHARS = 50 * 1024 * 1024


@governed_tool
def dump_warehouse() -> dict[str, Any]:
    """Every row of the warehouse (far too much for any model)."""
    return {"rows": "r" * HUGE_CHARS}


@governed_tool
def medium_export() -> dict[str, Any]:
    """A result above the inline cap but below the offload threshold."""
    return {"rows": "m" * 200_000}


def test_a_50_mb_result_is_refused_by_size_and_the_thread_runs_again(
    provider: SQLModelProvider,
) -> None:
    script: list[Turn] = [
        CallTools([ToolCall("dump_warehouse", {})]),
        Reply("Too big."),
        Reply("Hello."),
    ]
    with ScriptedModel(script) as model:
        agent = (
            MemAgentBuilder()
            .with_agent_id("warehouse")
            .with_llm_config(llm_config(model))
            .with_tools([dump_warehouse])
            .with_memory_provider(provider)
            .build()
        )
        first = agent.run("Dump everything", thread_id="t-1")
        checkpoint = provider.ledger.latest_checkpoint("warehouse", "t-1")
        second = agent.run("Hi again", thread_id="t-1")

    assert first.status == "completed", first.error
    assert second.status == "completed", second.error
    assert [outcome["reason_code"] for outcome in first.outcomes] == ["result_too_large"]
    assert first.outcomes[0]["status"] == "error"
    assert len(model.requests) == 3
    assert all(len(json.dumps(request.body)) < 100_000 for request in model.requests)
    tool_message = next(m for m in model.requests[1].messages if m["role"] == "tool")
    error = json.loads(tool_message["content"])["error"]
    assert error["code"] == "result_too_large" and "characters" in error["message"]
    assert checkpoint is not None
    assert len(json.dumps(checkpoint.messages)) + len(json.dumps(checkpoint.state)) < 100_000
    results = provider.ledger.trace_events(kind="tool_result")
    assert [event.reason_code for event in results] == ["result_too_large"]


def test_with_offloading_a_result_above_the_cap_becomes_a_pointer(
    provider: SQLModelProvider,
) -> None:
    script: list[Turn] = [CallTools([ToolCall("medium_export", {})]), Reply("Stored.")]
    with ScriptedModel(script) as model:
        agent = (
            MemAgentBuilder()
            .with_agent_id("exports")
            .with_llm_config(llm_config(model))
            .with_tools([medium_export])
            .with_tool_result_policy(ToolResultPolicy(offload_above_chars=500_000))
            .with_memory_provider(provider)
            .build()
        )
        result = agent.run("Export")

    assert result.status == "completed"
    assert result.outcomes[0]["status"] == "success"
    tool_message = next(m for m in model.requests[1].messages if m["role"] == "tool")
    pointer = json.loads(tool_message["content"])["offloaded_result"]
    assert pointer["size_chars"] > 200_000
    assert len(tool_message["content"]) < 10_000
