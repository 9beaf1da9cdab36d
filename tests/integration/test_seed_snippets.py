"""The seed page's snippets, as written there (memorizz -> supervisor), against a real
loopback model server and a real ledger file in SUPERVISOR_HOME."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall, Turn


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[Turn]]:
    """Point the environment at a scripted model and a private ledger; yield the script."""
    turns: list[Turn] = []

    def next_turn(_request: Any) -> Turn:
        return turns.pop(0) if turns else Reply("(script exhausted)")

    with ScriptedModel(next_turn) as model:
        for key, value in model.env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("SUPERVISOR_HOME", str(tmp_path / "home"))
        monkeypatch.delenv("SUPERVISOR_DB", raising=False)
        yield turns


class _Crm:
    def __init__(self) -> None:
        self.created: list[dict[str, str]] = []

    def create_customer(self, name: str, email: str) -> dict[str, str]:
        self.created.append({"name": name, "email": email})
        return {"customer_id": f"cus_{len(self.created)}", "name": name}


application_crm = _Crm()


def test_register_a_typed_tool_and_classify_side_effects(
    scripted: list[Turn], capsys: pytest.CaptureFixture[str]
) -> None:
    from supervisor import MemAgentBuilder, governed_tool

    @governed_tool(deterministic=True, domains=("inventory",))
    def inventory_lookup(
        sku: str,
        warehouse: Literal["london", "new-york"] = "london",
    ) -> dict:  # type: ignore[type-arg]
        """Return current inventory for one SKU and warehouse."""
        return {"sku": sku, "warehouse": warehouse, "available": 12}

    agent = (
        MemAgentBuilder()
        .with_llm_config({"provider": "openai", "model": "gpt-4o-mini"})
        .with_tools([inventory_lookup])
        .build()
    )

    @governed_tool(
        deterministic=False,
        side_effects=True,
        requires_approval=True,
        approval_reason="Creates a customer in the production CRM",
        domains=("crm",),
    )
    def create_customer(name: str, email: str) -> dict:  # type: ignore[type-arg]
        """Create one CRM customer after host approval."""
        return application_crm.create_customer(name=name, email=email)

    scripted.extend(
        [CallTools([ToolCall("inventory_lookup", {"sku": "A-100"})]), Reply("12 available.")]
    )
    assert agent.run("Stock of A-100?").output == "12 available."
    assert create_customer.policy.requires_approval
    assert "approved" not in create_customer.parameters["properties"]

    # Durable approval lifecycle, with a second agent holding create_customer.
    agent = (
        MemAgentBuilder()
        .with_llm_config({"provider": "openai", "model": "gpt-4o-mini"})
        .with_tools([inventory_lookup, create_customer])
        .build()
    )
    scripted.extend(
        [
            CallTools([ToolCall("create_customer", {"name": "Ada", "email": "ada@example.com"})]),
            Reply("Created."),
        ]
    )
    paused = agent.run("Create Ada Lovelace, ada@example.com")
    assert paused.status == "awaiting_approval"
    assert application_crm.created == []

    pending = agent.list_approval_proposals(status="pending")
    proposal_id = pending[0]["proposal_id"]

    agent.approve(
        proposal_id,
        approver_id="operator@example.com",
        reason="Customer and destination reviewed",
    )
    result = agent.resume_approval(proposal_id, continue_model=False)

    print(result.proposal)
    print(result.tool_result)
    print(result.consumed)  # True; the proposal cannot be reused

    assert result.consumed is True
    assert result.proposal["status"] == "executed"
    assert result.proposal["approver_id"] == "operator@example.com"
    assert application_crm.created == [{"name": "Ada", "email": "ada@example.com"}]
    assert "True" in capsys.readouterr().out
    assert agent.resume_approval(proposal_id).consumed is True
    assert len(application_crm.created) == 1


def test_large_tool_results(scripted: list[Turn]) -> None:
    from supervisor import MemAgentBuilder, ToolResultPolicy, governed_tool

    @governed_tool
    def dump_catalogue() -> dict:  # type: ignore[type-arg]
        """Return the whole catalogue."""
        return {"items": [{"sku": f"SKU-{index:05d}", "name": "widget"} for index in range(5000)]}

    agent = (
        MemAgentBuilder()
        .with_tool_result_policy(ToolResultPolicy(offload_above_chars=8_000))
        .with_tools([dump_catalogue])
        .build()
    )
    scripted.extend([CallTools([ToolCall("dump_catalogue", {})]), Reply("Catalogue stored.")])
    assert agent.run("Dump the catalogue").status == "completed"


def test_report_structured_tool_outcomes(
    scripted: list[Turn], capsys: pytest.CaptureFixture[str]
) -> None:
    from supervisor import MemAgentBuilder, ToolOutcome, ToolOutcomeStatus, ToolResult

    class _Primary:
        def lookup(self, sku: str) -> list[dict[str, Any]]:
            raise TimeoutError

    class _Replica:
        def lookup(self, sku: str) -> list[dict[str, Any]]:
            return [{"sku": sku, "available": 4}]

    primary_inventory = _Primary()
    inventory_replica = _Replica()

    def inventory_lookup(sku: str) -> ToolResult:  # type: ignore[type-arg]
        try:
            return ToolResult(
                primary_inventory.lookup(sku),
                ToolOutcome(
                    status=ToolOutcomeStatus.SUCCESS,
                    provider="primary_inventory",
                    result_count=1,
                ),
            )
        except TimeoutError:
            rows = inventory_replica.lookup(sku)
            return ToolResult(
                rows,
                ToolOutcome(
                    status=ToolOutcomeStatus.FALLBACK,
                    reason_code="primary_timeout",
                    primary_provider="primary_inventory",
                    fallback_provider="inventory_replica",
                    retryable=True,
                    result_count=len(rows),
                ),
            )

    agent = MemAgentBuilder().with_tools([inventory_lookup]).build()
    scripted.extend([CallTools([ToolCall("inventory_lookup", {"sku": "A-1"})]), Reply("4 left.")])
    agent.run("Stock of A-1?")

    for outcome in agent.last_tool_outcomes:
        print(outcome["tool_name"], outcome["status"], outcome.get("reason_code"))

    assert capsys.readouterr().out.strip() == "inventory_lookup fallback primary_timeout"
    assert agent.last_tool_outcomes[0]["fallback_provider"] == "inventory_replica"
    assert json.dumps(agent.last_tool_outcomes)  # content-free and JSON-ready
