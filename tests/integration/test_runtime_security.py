"""Security invariants of the runtime, each by a test that fails if the invariant breaks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.agents import create_customer, side_effects

from supervisor import ContextPolicy, MemAgentBuilder, SQLModelProvider
from supervisor.ledger.clock import ManualClock
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall

CREATE_ADA = CallTools([ToolCall("create_customer", {"name": "Ada", "email": "ada@example.com"})])


@pytest.fixture(autouse=True)
def _side_effect_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDE_EFFECT_FILE", str(tmp_path / "side_effects.log"))


def _agent(model: ScriptedModel, provider: SQLModelProvider, **options: Any) -> Any:
    builder = (
        MemAgentBuilder()
        .with_agent_id("secure-agent")
        .with_llm_config(
            {
                "provider": "openai",
                "model": "m",
                "base_url": model.base_url,
                "api_key": "sk-live-very-secret-key-123456",
            }
        )
        .with_memory_provider(provider)
        .with_tools([create_customer])
    )
    if "policy" in options:
        builder = builder.with_context_policy(options["policy"])
    return builder.build_and_save()


def test_the_api_key_never_reaches_the_ledger(sqlite_url: str) -> None:
    with SQLModelProvider(sqlite_url) as provider, ScriptedModel([CREATE_ADA]) as model:
        agent = _agent(model, provider)
        agent.run("create Ada")
    engine = sa.create_engine(sqlite_url)
    with engine.connect() as connection:
        for table in ("agent", "trace_event", "checkpoint", "proposal", "audit"):
            rows = connection.execute(sa.text(f"SELECT * FROM {table}")).all()
            assert rows, table
            assert "sk-live-very-secret" not in json.dumps([list(map(str, row)) for row in rows])
    engine.dispose()
    assert "sk-live" not in repr(agent.model.config)


def test_an_approval_expired_before_resume_never_runs(sqlite_url: str) -> None:
    clock = ManualClock()
    with (
        SQLModelProvider(sqlite_url, clock=clock) as provider,
        ScriptedModel([CREATE_ADA, Reply("noted")]) as model,
    ):
        agent = _agent(model, provider, policy=ContextPolicy(approval_ttl_seconds=60))
        proposal_id = agent.run("create Ada").proposals[0].proposal_id
        agent.approve(proposal_id, approver_id="op")
        clock.advance(61)
        resumed = agent.resume_approval(proposal_id, continue_model=True)
        assert resumed.error_code == "expired"
        assert resumed.consumed is False
        tool_answer = next(m for m in model.requests[-1].messages if m["role"] == "tool")
        assert json.loads(tool_answer["content"])["error"]["code"] == "expired"
    assert side_effects() == []


def test_a_changed_execution_target_refuses_the_claim(sqlite_url: str) -> None:
    with SQLModelProvider(sqlite_url) as provider, ScriptedModel([CREATE_ADA]) as model:
        create_customer.execution_target = {"crm": "staging"}
        try:
            agent = _agent(model, provider)
            proposal_id = agent.run("create Ada").proposals[0].proposal_id
            assert provider.ledger.get(proposal_id).execution_target == {"crm": "staging"}
            agent.approve(proposal_id, approver_id="op")
            create_customer.execution_target = {"crm": "production"}
            resumed = agent.resume_approval(proposal_id)
        finally:
            create_customer.execution_target = None
    assert resumed.consumed is False
    assert resumed.error_code == "arguments_mismatch"
    assert side_effects() == []


def test_tampered_stored_arguments_never_run(sqlite_url: str) -> None:
    with SQLModelProvider(sqlite_url) as provider, ScriptedModel([CREATE_ADA]) as model:
        agent = _agent(model, provider)
        proposal_id = agent.run("create Ada").proposals[0].proposal_id
        agent.approve(proposal_id, approver_id="op")
        engine = sa.create_engine(sqlite_url)
        with engine.begin() as connection:
            connection.execute(
                sa.text("UPDATE proposal SET arguments_json = :forged WHERE id = :id"),
                {"forged": '{"email":"mallory@evil.example","name":"Ada"}', "id": proposal_id},
            )
        engine.dispose()
        resumed = agent.resume_approval(proposal_id)
    assert resumed.consumed is False
    assert resumed.error_code == "arguments_mismatch"
    assert side_effects() == []
