"""Intake of one model turn and the answers it gets: duplicate ids, the per-turn cap, scope,
and what the semantic cache may replay. A real loopback model server and a real ledger file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.agents import create_customer, inventory_lookup, side_effects
from support.cli import SUPERVISOR

from supervisor import ContextPolicy, MemAgentBuilder, SQLModelProvider, Toolbox, governed_tool
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall

#: What each call over the per-turn cap after the first one is answered with.
OVER_CAP_ANSWER = json.dumps({"error": {"code": "tool_call_limit"}})


@governed_tool(deterministic=True, domains=("hr",))
def salary_report(team: str) -> dict[str, Any]:
    """Total salaries of one team (HR data of the user it is scoped to)."""
    return {"team": team, "total": 1_234_000}


@pytest.fixture(autouse=True)
def _side_effect_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDE_EFFECT_FILE", str(tmp_path / "side_effects.log"))


def _builder(model: ScriptedModel, provider: SQLModelProvider) -> MemAgentBuilder:
    return (
        MemAgentBuilder()
        .with_name("Operations")
        .with_llm_config(
            {"provider": "openai", "model": "m", "base_url": model.base_url, "api_key": "k"}
        )
        .with_memory_provider(provider)
    )


def _tool_messages(request_messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [message for message in request_messages if message["role"] == "tool"]


def _hr_toolbox(provider: SQLModelProvider) -> Toolbox:
    toolbox = Toolbox.from_functions(
        [inventory_lookup], memory_provider=provider, agent_id="operations"
    )
    toolbox.add([salary_report], user_id="alice")
    return toolbox


# item 9: duplicate call ids -----------------------------------------------------------------
def test_duplicate_call_ids_each_run_their_own_arguments(
    provider: SQLModelProvider, sqlite_url: str
) -> None:
    with ScriptedModel(
        [
            CallTools(
                [
                    ToolCall("create_customer", {"name": "Ada", "email": "a@x.io"}, id="dup"),
                    ToolCall("inventory_lookup", {"sku": "A-1"}, id="dup"),
                    ToolCall("create_customer", {"name": "Bob", "email": "b@x.io"}, id="dup"),
                    ToolCall("inventory_lookup", {"sku": "B-2"}, id="dup~2"),
                ]
            ),
            Reply("Both created."),
        ]
    ) as model:
        agent = _builder(model, provider).with_tools([create_customer, inventory_lookup]).build()
        paused = agent.run("create Ada and Bob")
        assert paused.status == "awaiting_approval"
        by_name = {p.arguments["name"]: p for p in paused.proposals}
        assert (by_name["Ada"].call_id, by_name["Bob"].call_id) == ("dup", "dup~4")
        for proposal in paused.proposals:
            agent.approve(proposal.proposal_id, approver_id="op")
        results = [
            agent.resume_approval(p.proposal_id, continue_model=True) for p in paused.proposals
        ]
        assert [result.consumed for result in results] == [True, True]
        assert [result.error_code for result in results] == [None, None]
        assert results[-1].assistant_response == "Both created."
        history = model.requests[1].messages
    assert sorted(side_effects()) == ["create_customer Ada a@x.io", "create_customer Bob b@x.io"]
    (assistant,) = [message for message in history if message.get("tool_calls")]
    sent_ids = [call["id"] for call in assistant["tool_calls"]]
    assert sent_ids == ["dup", "dup~3", "dup~4", "dup~2"]
    answered = [message["tool_call_id"] for message in _tool_messages(history)]
    assert answered == sent_ids  # every id once, in the model's order
    answers = [json.loads(message["content"]) for message in _tool_messages(history)]
    assert answers[0]["customer_id"] == "cus_ada" and answers[2]["customer_id"] == "cus_bob"
    assert (answers[1]["sku"], answers[3]["sku"]) == ("A-1", "B-2")
    actions = [record.action for record in provider.ledger.events_since(0)]
    assert "claim_refused" not in actions
    assert actions.count("complete") == 2
    assert SUPERVISOR is not None
    verified = subprocess.run(
        [SUPERVISOR, "audit", "verify", "--db", sqlite_url],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stderr
    assert "audit chain ok" in verified.stdout
    rekeyed = [
        event.payload["model_call_id"]
        for event in provider.ledger.trace_events(kind="tool_call")
        if "model_call_id" in event.payload
    ]
    assert rekeyed == ["dup", "dup"]


# item 14: the per-turn cap ------------------------------------------------------------------
def test_five_thousand_calls_in_one_turn_collapse_into_one_refusal(
    provider: SQLModelProvider,
) -> None:
    calls = [ToolCall("inventory_lookup", {"sku": f"S-{index}"}) for index in range(5000)]
    cap = ContextPolicy().max_tool_calls_per_turn
    with ScriptedModel([CallTools(calls), Reply("done")]) as model:
        agent = _builder(model, provider).with_tools([inventory_lookup]).build()
        result = agent.run("look up everything")
        assert result.status == "completed"
        answers = _tool_messages(model.requests[1].messages)
    events = provider.ledger.trace_events(run_id=result.run_id, limit=100_000)
    # run started, 2 model calls, run completed; a call and a result per call within the cap;
    # one event for every call over it.
    assert len(events) == 4 + 2 * cap + 1
    (collapsed,) = [event for event in events if event.reason_code == "tool_call_limit"]
    assert collapsed.payload["refused_calls"] == 5000 - cap
    assert len(answers) == 5000  # the protocol needs one answer per call id
    assert [json.loads(a["content"])["sku"] for a in answers[:cap]] == [
        f"S-{index}" for index in range(cap)
    ]
    told = json.loads(answers[cap]["content"])["error"]
    assert told["code"] == "tool_call_limit"
    assert f"{5000 - cap} in all" in told["message"]
    assert all(a["content"] == OVER_CAP_ANSWER for a in answers[cap + 1 :])
    assert len(result.outcomes) == cap + 1
    assert result.outcomes[-1]["reason_code"] == "tool_call_limit"
    assert result.outcomes[-1]["refused_calls"] == 5000 - cap


# item 15e: out-of-scope answers ---------------------------------------------------------------
def test_another_users_tool_is_answered_exactly_like_an_unknown_tool(
    provider: SQLModelProvider,
) -> None:
    toolbox = _hr_toolbox(provider)
    handle = toolbox.handle_for("salary_report")
    fake = "tb_0123456789abcdef"
    with ScriptedModel(
        [
            CallTools(
                [
                    ToolCall("salary_report", {"team": "core"}),
                    ToolCall("payroll_export", {"team": "core"}),
                    ToolCall("invoke_tool", {"handle": handle, "arguments_json": "{}"}),
                    ToolCall("invoke_tool", {"handle": fake, "arguments_json": "{}"}),
                ]
            ),
            Reply("nothing"),
        ]
    ) as model:
        agent = _builder(model, provider).with_toolbox(toolbox).build()
        result = agent.run("salaries of core", user_id="bob")
        answers = [a["content"] for a in _tool_messages(model.requests[1].messages)]
    by_name, unknown_name, by_handle, unknown_handle = answers
    assert by_name == unknown_name.replace("payroll_export", "salary_report")
    assert json.loads(by_name)["error"]["code"] == "unknown_tool"
    assert by_handle == unknown_handle.replace(fake, handle)
    assert json.loads(by_handle)["error"]["code"] == "unknown_tool_handle"
    assert handle not in by_name
    assert [outcome["reason_code"] for outcome in result.outcomes] == [
        "tool_out_of_scope", "unknown_tool", "tool_out_of_scope", "unknown_tool_handle",
    ]  # fmt: skip


# item 13: the semantic cache ----------------------------------------------------------------
def test_cached_answer_built_with_a_users_scoped_tool_is_never_served_to_another_user(
    provider: SQLModelProvider,
) -> None:
    question = "What do core salaries total?"
    with ScriptedModel(
        [
            CallTools([ToolCall("salary_report", {"team": "core"})]),
            Reply("Core salaries total 1,234,000."),
            Reply("I cannot see salaries."),
        ]
    ) as model:
        agent = (
            _builder(model, provider).with_toolbox(_hr_toolbox(provider)).with_semantic_cache()
        ).build()
        alice = agent.run(question, user_id="alice")
        assert alice.output == "Core salaries total 1,234,000."
        bob = agent.run(question, user_id="bob")
        assert bob.output == "I cannot see salaries."
        assert len(model.requests) == 3  # bob's run asked the model
        again = agent.run(question, user_id="alice")
        assert again.output == alice.output
        assert len(model.requests) == 3  # alice's own answer is still cached for her
    assert provider.ledger.trace_events(run_id=bob.run_id, kind="cache_hit") == []
    assert len(provider.ledger.trace_events(run_id=again.run_id, kind="cache_hit")) == 1


@pytest.mark.parametrize("tool_name", ["delete_everything", "create_customer"])
def test_a_run_whose_only_call_was_refused_is_not_cached(
    provider: SQLModelProvider, tool_name: str
) -> None:
    with ScriptedModel(
        [
            CallTools([ToolCall(tool_name, {"name": "A", "email": "a@b.c"})]),
            Reply("Everything was deleted."),
            Reply("I could not delete anything."),
        ]
    ) as model:
        agent = (
            _builder(model, provider)
            .with_tools([inventory_lookup, create_customer])
            .with_context_policy(ContextPolicy(denied_tools=("create_customer",)))
            .with_semantic_cache()
            .build()
        )
        first = agent.run("Delete everything")
        assert first.output == "Everything was deleted."
        assert [(o["status"], o["tool_name"]) for o in first.outcomes] == [("error", tool_name)]
        second = agent.run("Delete everything")
        assert second.output == "I could not delete anything."
    assert provider.ledger.trace_events(run_id=second.run_id, kind="cache_hit") == []
    assert side_effects() == []
