"""MemAgent over a real loopback chat-completions server and a real ledger file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.agents import (
    broken_lookup,
    create_customer,
    export_report,
    inventory_lookup,
    replica_lookup,
    send_email,
    side_effects,
)

from supervisor import (
    ContextPolicy,
    MemAgentBuilder,
    SQLModelProvider,
    ToolResultPolicy,
)
from supervisor.testing import CallTools, Fail, Reply, ScriptedModel, ToolCall, Turn


@pytest.fixture(autouse=True)
def _side_effect_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDE_EFFECT_FILE", str(tmp_path / "side_effects.log"))


def _llm(model: ScriptedModel, **extra: Any) -> dict[str, Any]:
    return {
        "provider": "openai",
        "model": "scripted-model",
        "base_url": model.base_url,
        "api_key": "sk-test",
        "max_retries": 2,
        **extra,
    }


def _agent(model: ScriptedModel, provider: SQLModelProvider, tools: list[Any], **kw: Any) -> Any:
    builder = (
        MemAgentBuilder()
        .with_name("Operations")
        .with_llm_config(_llm(model))
        .with_memory_provider(provider)
        .with_tools(tools)
    )
    if "policy" in kw:
        builder = builder.with_context_policy(kw["policy"])
    if "result_policy" in kw:
        builder = builder.with_tool_result_policy(kw["result_policy"])
    return builder.build()


def _script(*turns: Turn) -> ScriptedModel:
    return ScriptedModel(list(turns))


def test_read_only_call_runs_and_the_model_answers(provider: SQLModelProvider) -> None:
    with _script(
        CallTools([ToolCall("inventory_lookup", {"sku": "A-100"}, id="call_a")]),
        Reply("12 in London."),
    ) as model:
        agent = _agent(model, provider, [inventory_lookup])
        result = agent.run("How many A-100 in London?")
        assert result.status == "completed"
        assert result.output == "12 in London."
        tool_messages = [m for m in model.requests[1].messages if m["role"] == "tool"]
        assert tool_messages == [
            {
                "role": "tool",
                "tool_call_id": "call_a",
                "content": json.dumps({"sku": "A-100", "warehouse": "london", "available": 12}),
            }
        ]
    assert agent.last_tool_outcomes[0]["status"] == "success"
    assert agent.last_tool_outcomes[0]["tool_name"] == "inventory_lookup"
    # The latency dispatch measured reaches the evidence the runtime keeps.
    assert agent.last_tool_outcomes[0]["latency_ms"] >= 0


def test_request_bodies_hold_no_approval_parameters_and_no_outcome_internals(
    provider: SQLModelProvider,
) -> None:
    with _script(
        CallTools([ToolCall("replica_lookup", {"sku": "A-100"})]),
        Reply("done"),
    ) as model:
        agent = _agent(model, provider, [inventory_lookup, create_customer, replica_lookup])
        agent.run("check")
        for request in model.requests:
            for tool in request.tools:
                properties = tool["function"]["parameters"]["properties"]
                assert not {"approved", "approve", "confirm", "confirmed", "approval"} & set(
                    properties
                )
        tool_content = next(m for m in model.requests[1].messages if m["role"] == "tool")["content"]
        assert json.loads(tool_content) == [{"sku": "A-100", "available": 3}]
        for internal in ("fallback", "primary_timeout", "degraded", "outcome", "replica"):
            assert internal not in tool_content


def test_side_effect_pauses_then_resumes_exactly_once(provider: SQLModelProvider) -> None:
    with _script(
        CallTools([ToolCall("create_customer", {"name": "Ada", "email": "ada@example.com"})]),
        Reply("Created."),
    ) as model:
        agent = _agent(model, provider, [create_customer])
        result = agent.run("Create Ada")
        assert result.status == "awaiting_approval"
        assert side_effects() == []
        pending = agent.list_approval_proposals(status="pending")
        proposal_id = pending[0]["proposal_id"]
        assert pending[0]["tool_name"] == "create_customer"
        assert pending[0].arguments == {"name": "Ada", "email": "ada@example.com"}
        agent.approve(proposal_id, approver_id="operator@example.com", reason="Reviewed")
        resumed = agent.resume_approval(proposal_id, continue_model=False)
        assert resumed.consumed is True
        assert resumed.ok is True
        assert resumed.tool_result["customer_id"] == "cus_ada"
        assert side_effects() == ["create_customer Ada ada@example.com"]
        again = agent.resume_approval(proposal_id, continue_model=True)
        assert again.error_code == "already_consumed"
        assert side_effects() == ["create_customer Ada ada@example.com"]
        assert agent.last_tool_outcomes[0]["status"] == "success"


def test_rejection_is_reported_honestly_and_nothing_runs(provider: SQLModelProvider) -> None:
    with _script(
        CallTools([ToolCall("create_customer", {"name": "Eve", "email": "eve@example.com"})]),
        Reply("Understood, not created."),
    ) as model:
        agent = _agent(model, provider, [create_customer])
        paused = agent.run("Create Eve")
        proposal_id = paused.proposals[0].proposal_id
        agent.reject(proposal_id, approver_id="op", reason="Unknown customer")
        resumed = agent.resume_approval(proposal_id, continue_model=True)
        assert resumed.consumed is False
        assert resumed.error_code == "denied"
        assert resumed.assistant_response == "Understood, not created."
        tool_message = next(m for m in model.requests[1].messages if m["role"] == "tool")
        body = json.loads(tool_message["content"])
        assert body["error"]["code"] == "denied"
        assert body["error"]["reason"] == "Unknown customer"
    assert side_effects() == []


def test_parallel_calls_are_keyed_by_call_id_and_history_keeps_order(
    provider: SQLModelProvider,
) -> None:
    with _script(
        CallTools(
            [
                ToolCall("create_customer", {"name": "Ada", "email": "a@x.io"}, id="call_1"),
                ToolCall("inventory_lookup", {"sku": "A-1"}, id="call_2"),
                ToolCall("send_email", {"to": "b@x.io", "subject": "hi"}, id="call_3"),
            ]
        ),
        Reply("All handled."),
    ) as model:
        agent = _agent(model, provider, [create_customer, inventory_lookup, send_email])
        paused = agent.run("do three things")
        assert paused.status == "awaiting_approval"
        by_tool = {proposal.tool_name: proposal for proposal in paused.proposals}
        assert set(by_tool) == {"create_customer", "send_email"}
        assert by_tool["create_customer"].call_id == "call_1"
        assert by_tool["send_email"].call_id == "call_3"
        agent.approve(by_tool["send_email"].proposal_id, approver_id="op")
        first = agent.resume_approval(by_tool["send_email"].proposal_id, continue_model=True)
        assert first.consumed is True
        assert first.assistant_response is None  # create_customer is still undecided
        assert len(model.requests) == 1
        agent.reject(by_tool["create_customer"].proposal_id, approver_id="op", reason="no")
        second = agent.resume_approval(by_tool["create_customer"].proposal_id, continue_model=True)
        assert second.assistant_response == "All handled."
        history = model.requests[1].messages
        assistant_index = next(index for index, m in enumerate(history) if m.get("tool_calls"))
        tools_after = history[assistant_index + 1 : assistant_index + 4]
        assert [m["tool_call_id"] for m in tools_after] == ["call_1", "call_2", "call_3"]
        assert json.loads(tools_after[0]["content"])["error"]["code"] == "denied"
        assert json.loads(tools_after[1]["content"])["available"] == 12
        assert json.loads(tools_after[2]["content"]) == {"sent": True, "to": "b@x.io"}
    assert side_effects() == ["send_email b@x.io hi"]


def test_invalid_arguments_are_answered_and_the_model_can_retry(
    provider: SQLModelProvider,
) -> None:
    with _script(
        CallTools([ToolCall("inventory_lookup", {"sku": "A-1", "warehouse": "paris"})]),
        CallTools([ToolCall("inventory_lookup", {"sku": "A-1"})]),
        Reply("ok"),
    ) as model:
        agent = _agent(model, provider, [inventory_lookup])
        result = agent.run("look up")
        assert result.status == "completed"
        first_answer = next(m for m in model.requests[1].messages if m["role"] == "tool")
        assert json.loads(first_answer["content"])["error"]["code"] == "invalid_arguments"
        assert [o["status"] for o in result.outcomes] == ["error", "success"]


def test_transient_errors_are_retried_and_a_dead_endpoint_fails_cleanly(
    provider: SQLModelProvider,
) -> None:
    with _script(Fail(503, times=1), Reply("fine")) as model:
        agent = _agent(model, provider, [inventory_lookup])
        assert agent.run("hello").output == "fine"
        assert len(model.requests) == 2
    dead_config = {**_llm(model), "base_url": "http://127.0.0.1:9/v1", "max_retries": 0}
    dead = (
        MemAgentBuilder()
        .with_llm_config(dead_config)
        .with_memory_provider(provider)
        .with_tools([inventory_lookup])
        .build()
    )
    failed = dead.run("hello", thread_id="t-dead")
    assert failed.status == "failed"
    assert failed.error is not None and failed.error["code"] == "model_unavailable"
    checkpoint = provider.ledger.latest_checkpoint(dead.agent_id, "t-dead")
    assert checkpoint is not None
    assert checkpoint.messages[-1] == {"role": "user", "content": "hello"}


def test_limits_stop_looping_models(provider: SQLModelProvider) -> None:
    loop = [CallTools([ToolCall("inventory_lookup", {"sku": "A-1"})]) for _ in range(5)]
    with _script(*loop, Reply("stop")) as model:
        agent = _agent(
            model,
            provider,
            [inventory_lookup],
            policy=ContextPolicy(max_attempts_per_call=2, max_model_turns=4),
        )
        result = agent.run("loop")
        assert result.status == "limit_reached"
        assert [o["reason_code"] for o in result.outcomes][:3] == [None, None, "attempt_limit"]


def test_large_results_are_offloaded_once_and_expandable(provider: SQLModelProvider) -> None:
    with _script(
        CallTools([ToolCall("export_report", {"rows": 4000})]),
        CallTools([ToolCall("export_report", {"rows": 4000})]),
        Reply("exported"),
    ) as model:
        agent = _agent(
            model,
            provider,
            [export_report],
            result_policy=ToolResultPolicy(offload_above_chars=8_000),
            policy=ContextPolicy(max_attempts_per_call=5),
        )
        result = agent.run("export")
        assert result.status == "completed"
        contents = [m["content"] for m in model.requests[2].messages if m["role"] == "tool"]
        assert len(contents) == 2
        pointers = [json.loads(content)["offloaded_result"] for content in contents]
        assert pointers[0]["digest"] == pointers[1]["digest"]
        assert "rep_42" in pointers[0]["identifiers"]
        assert all(len(content) < 8_000 for content in contents)
        tool_names = {tool["function"]["name"] for tool in model.requests[0].tools}
        assert {"expand_result", "search_result"} <= tool_names


def test_streaming_runs_keep_outcomes_and_tool_calls(provider: SQLModelProvider) -> None:
    with _script(
        CallTools(
            [
                ToolCall("inventory_lookup", {"sku": "A-1"}, id="call_x"),
                ToolCall("replica_lookup", {"sku": "A-2"}, id="call_y"),
            ]
        ),
        Reply("streamed answer"),
    ) as model:
        agent = (
            MemAgentBuilder()
            .with_llm_config(_llm(model, stream=True))
            .with_memory_provider(provider)
            .with_tools([inventory_lookup, replica_lookup])
            .build()
        )
        result = agent.run("stream it")
        assert all(request.stream for request in model.requests)
    assert result.output == "streamed answer"
    assert [o["call_id"] for o in agent.last_tool_outcomes] == ["call_x", "call_y"]
    assert [o["status"] for o in agent.last_tool_outcomes] == ["success", "fallback"]
    assert agent.last_tool_outcomes[1]["degraded"] is True
    assert result.usage["total_tokens"] > 0


def test_outcome_evidence_is_queryable_from_the_trace(provider: SQLModelProvider) -> None:
    with _script(
        CallTools([ToolCall("replica_lookup", {"sku": "SECRET-SKU-1"})]),
        Reply("ok"),
    ) as model:
        agent = _agent(model, provider, [replica_lookup])
        result = agent.run("trace me")
    events = provider.ledger.trace_events(run_id=result.run_id, kind="tool_result")
    assert [(event.tool, event.outcome_status, event.reason_code) for event in events] == [
        ("replica_lookup", "fallback", "primary_timeout")
    ]
    assert "SECRET-SKU-1" not in json.dumps(events[0].payload)
    kinds = {event.kind for event in provider.ledger.trace_events(run_id=result.run_id)}
    assert {"run", "model_call", "tool_call", "tool_result"} <= kinds


def _cached_agent(model: ScriptedModel, provider: SQLModelProvider, tools: list[Any]) -> Any:
    return (
        MemAgentBuilder()
        .with_name("Cached")
        .with_llm_config(_llm(model))
        .with_memory_provider(provider)
        .with_tools(tools)
        .with_semantic_cache()
        .build()
    )


def test_clean_read_only_runs_are_cached_and_hits_are_traced(provider: SQLModelProvider) -> None:
    with _script(
        CallTools([ToolCall("inventory_lookup", {"sku": "A-1"})]),
        Reply("12 left."),
    ) as model:
        agent = _cached_agent(model, provider, [inventory_lookup])
        assert agent.run("How many A-1?").output == "12 left."
        hit = agent.run("  how many a-1 ")
        assert hit.output == "12 left."
        assert len(model.requests) == 2  # the second run never reached the model
    events = provider.ledger.trace_events(run_id=hit.run_id, kind="cache_hit")
    assert len(events) == 1


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (replica_lookup, {"sku": "A-1"}),  # fallback + degraded: not clean
        (broken_lookup, {"sku": "A-1"}),  # provider_error
        (send_email, {"to": "a@b.c", "subject": "s"}),  # side effect (needs approval)
    ],
)
def test_non_clean_or_side_effecting_runs_bypass_admission(
    provider: SQLModelProvider, tool: Any, arguments: dict[str, Any]
) -> None:
    with _script(
        CallTools([ToolCall(tool.name, arguments)]),
        Reply("first answer"),
        Reply("second answer"),
    ) as model:
        agent = _cached_agent(model, provider, [tool])
        first = agent.run("same question")
        if first.status == "awaiting_approval":
            proposal_id = first.proposals[0].proposal_id
            agent.approve(proposal_id, approver_id="op")
            agent.resume_approval(proposal_id, continue_model=True)
        second = agent.run("same question")
        assert second.output in ("first answer", "second answer")
        assert provider.ledger.trace_events(run_id=second.run_id, kind="cache_hit") == []


def test_a_run_sends_its_history_and_tools_and_leaves_checkpoint_and_trace(
    provider: SQLModelProvider,
) -> None:
    """The request body carries the history and the exact tool definitions (sent as built,
    without the client's parameter transformation); when ``run()`` returns, the final
    checkpoint and every trace event of the run are in the ledger."""
    with _script(CallTools([ToolCall("inventory_lookup", {"sku": "A-1"})]), Reply("ok")) as model:
        agent = _agent(model, provider, [inventory_lookup])
        result = agent.run("stock?")
        requests = model.requests
    definition = inventory_lookup.openai.definition
    assert [request.tools for request in requests] == [[definition], [definition]]
    assert [message["role"] for message in requests[1].messages][-3:] == [
        "user", "assistant", "tool",
    ]  # fmt: skip
    assert requests[1].body["model"] == "scripted-model"
    checkpoint = provider.ledger.latest_checkpoint(agent.agent_id, result.thread_id)
    assert checkpoint is not None and checkpoint.state["status"] == "completed"
    assert checkpoint.messages[-1] == {"role": "assistant", "content": "ok"}
    kinds = [event.kind for event in provider.ledger.trace_events(run_id=result.run_id)]
    assert kinds == ["run", "model_call", "tool_call", "tool_result", "model_call", "run"]
