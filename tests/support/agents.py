"""Tools and agent factories the runtime tests use in this process and in subprocesses.

Side effects are counted in the file named by ``SIDE_EFFECT_FILE`` (one line per execution), so a
test can prove a call ran exactly once across processes and crashes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from supervisor import ToolOutcome, ToolOutcomeStatus, ToolResult, governed_tool

if TYPE_CHECKING:
    from supervisor import MemAgent, SQLModelProvider
    from supervisor.ledger.models import Proposal
    from supervisor.testing import ScriptedModel

#: The customer the approval end-to-end tests ask an agent to create.
ADA = {"name": "Ada", "email": "ada@example.com"}


def side_effects() -> list[str]:
    """Lines written by side-effecting tools so far."""
    path = Path(os.environ["SIDE_EFFECT_FILE"])
    return path.read_text().splitlines() if path.exists() else []


def _record(line: str) -> None:
    with open(os.environ["SIDE_EFFECT_FILE"], "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


@governed_tool(deterministic=True, domains=("inventory",))
def inventory_lookup(
    sku: str,
    warehouse: Literal["london", "new-york"] = "london",
) -> dict[str, Any]:
    """Return current inventory for one SKU and warehouse."""
    return {"sku": sku, "warehouse": warehouse, "available": 12}


@governed_tool(
    deterministic=False,
    side_effects=True,
    requires_approval=True,
    approval_reason="Creates a customer in the production CRM",
    domains=("crm",),
)
def create_customer(name: str, email: str) -> dict[str, Any]:
    """Create one CRM customer after host approval."""
    _record(f"create_customer {name} {email}")
    return {"customer_id": f"cus_{name.lower()}", "name": name, "email": email}


@governed_tool(deterministic=False, side_effects=True, domains=("mail",))
def send_email(to: str, subject: str) -> dict[str, Any]:
    """Send an e-mail."""
    _record(f"send_email {to} {subject}")
    return {"sent": True, "to": to}


@governed_tool(deterministic=True, domains=("reports",))
def export_report(rows: int) -> dict[str, Any]:
    """Export a large report."""
    return {
        "report_id": "rep_42",
        "rows": [{"id": f"row_{index}", "value": "x" * 40} for index in range(rows)],
    }


@governed_tool(deterministic=True, domains=("inventory",))
def replica_lookup(sku: str) -> ToolResult[list[dict[str, Any]]]:
    """Inventory from the replica after a primary timeout."""
    rows = [{"sku": sku, "available": 3}]
    return ToolResult(
        rows,
        ToolOutcome(
            status=ToolOutcomeStatus.FALLBACK,
            reason_code="primary_timeout",
            primary_provider="primary_inventory",
            fallback_provider="inventory_replica",
            retryable=True,
            degraded=True,
            result_count=len(rows),
        ),
    )


@governed_tool(deterministic=True, domains=("inventory",))
def broken_lookup(sku: str) -> ToolResult[dict[str, Any]]:
    """A provider that is down."""
    return ToolResult(
        {"sku": sku, "available": None},
        ToolOutcome(
            status=ToolOutcomeStatus.PROVIDER_ERROR,
            reason_code="provider_unavailable",
            provider="primary_inventory",
            retryable=True,
        ),
    )


ALL_TOOLS = [inventory_lookup, create_customer, send_email, export_report, replica_lookup]


def approved_create_customer(
    provider: SQLModelProvider, model: ScriptedModel, agent_id: str
) -> tuple[MemAgent, Proposal]:
    """A saved agent whose run paused on ``create_customer(ADA)``, approved by ``op``.

    ``model`` must answer the first request with that one call.
    """
    from supervisor import MemAgentBuilder
    from supervisor.testing import llm_config

    agent = (
        MemAgentBuilder().with_agent_id(agent_id).with_llm_config(llm_config(model))
        .with_memory_provider(provider).with_tools([create_customer]).build_and_save()
    )  # fmt: skip
    proposal = agent.run("create Ada").proposals[0]
    agent.approve(proposal.proposal_id, approver_id="op")
    return agent, proposal
