"""Progressive disclosure in the runtime: meta-tools plus the top-k schemas, scoped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.agents import create_customer, inventory_lookup, side_effects

from supervisor import ContextPolicy, MemAgentBuilder, SQLModelProvider, Toolbox, governed_tool
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall
from supervisor.tools.governed import GovernedTool

DOMAINS = ("billing", "calendar", "email", "files", "hr", "shipping")


def _make_tool(index: int) -> GovernedTool[..., Any]:
    domain = DOMAINS[index % len(DOMAINS)]

    def tool(record_id: str) -> dict[str, Any]:
        return {"record_id": record_id, "tool": index}

    tool.__name__ = f"{domain}_record_{index}"
    tool.__doc__ = f"Fetch one {domain} record number {index} by id."
    return governed_tool(domains=(domain,))(tool)


@pytest.fixture(autouse=True)
def _side_effect_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDE_EFFECT_FILE", str(tmp_path / "side_effects.log"))


def _llm(model: ScriptedModel) -> dict[str, Any]:
    return {"provider": "openai", "model": "m", "base_url": model.base_url, "api_key": "k"}


def test_seed_toolbox_snippet_sends_two_meta_tools_and_top_k(provider: SQLModelProvider) -> None:
    extra = [_make_tool(index) for index in range(46)]
    toolbox = Toolbox.from_functions(
        [inventory_lookup, create_customer, *extra],
        memory_provider=provider,
        agent_id="operations-agent",
        augment=False,
    )
    assert len(toolbox) == 48
    with ScriptedModel([Reply("ok")]) as model:
        agent = (
            MemAgentBuilder()
            .with_name("Operations")
            .with_llm_config(_llm(model))
            .with_memory_provider(provider)
            .with_tools([inventory_lookup, create_customer])
            .with_toolbox(toolbox)
            .with_context_policy(ContextPolicy(tool_top_k=4))
            .build_and_save()
        )
        agent.run("Fetch the billing record and the calendar record")
        names = model.requests[0].tool_names
    assert names[:2] == ["discover_tools", "invoke_tool"]
    assert len(names) == 6
    assert all(name.startswith(("billing_", "calendar_")) for name in names[2:])


def test_invoke_by_handle_goes_through_approval(provider: SQLModelProvider) -> None:
    toolbox = Toolbox.from_functions(
        [inventory_lookup, create_customer], memory_provider=provider, agent_id="ops"
    )
    handle = toolbox.handle_for("create_customer")
    arguments = json.dumps({"name": "Ada", "email": "ada@example.com"})
    with ScriptedModel(
        [
            CallTools([ToolCall("invoke_tool", {"handle": handle, "arguments_json": arguments})]),
            Reply("created"),
        ]
    ) as model:
        agent = (
            MemAgentBuilder()
            .with_llm_config(_llm(model))
            .with_memory_provider(provider)
            .with_toolbox(toolbox)
            .build()
        )
        paused = agent.run("create Ada")
        assert paused.status == "awaiting_approval"
        (proposal,) = paused.proposals
        assert proposal.tool_name == "create_customer"
        assert side_effects() == []
        agent.approve(proposal.proposal_id, approver_id="op")
        assert agent.resume_approval(proposal.proposal_id, continue_model=True).consumed
    assert side_effects() == ["create_customer Ada ada@example.com"]


def test_out_of_scope_tools_are_never_revealed_nor_invocable(provider: SQLModelProvider) -> None:
    toolbox = Toolbox.from_functions(
        [inventory_lookup, create_customer], memory_provider=provider, agent_id="scoped"
    )
    crm_handle = toolbox.handle_for("create_customer")
    with ScriptedModel(
        [
            CallTools(
                [
                    ToolCall("invoke_tool", {"handle": crm_handle, "arguments_json": "{}"}),
                    ToolCall("create_customer", {"name": "A", "email": "a@b.c"}),
                    ToolCall("discover_tools", {"query": "create customer crm", "limit": 5}),
                ]
            ),
            Reply("done"),
        ]
    ) as model:
        agent = (
            MemAgentBuilder()
            .with_llm_config(_llm(model))
            .with_memory_provider(provider)
            .with_toolbox(toolbox)
            .with_context_policy(ContextPolicy(allowed_domains=("inventory",)))
            .build()
        )
        result = agent.run("create a customer in the crm")
        assert result.status == "completed"
        assert "create_customer" not in model.requests[0].tool_names
        answers = [m["content"] for m in model.requests[1].messages if m["role"] == "tool"]
    # Out of scope is answered as if the tool did not exist; the host's outcome says why.
    assert json.loads(answers[0])["error"]["code"] == "unknown_tool_handle"
    assert json.loads(answers[0])["error"]["message"] == f"No tool has the handle {crm_handle!r}."
    assert json.loads(answers[1])["error"]["code"] == "unknown_tool"
    assert [o["reason_code"] for o in result.outcomes] == ["tool_out_of_scope"] * 2
    assert "create_customer" not in answers[2]
    assert provider.ledger.list(status="pending").items == ()
