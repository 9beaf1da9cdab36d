"""One real agent run whose calls end every way an approval can: the trace the OTLP tests export.

Through the SDK against the shipped ``ScriptedModel`` on a real SQLite ledger with a
``ManualClock`` and a stored policy: a read that needs no approval, a refund a rule allows, one
a rule denies, and three calls for a person: approved after 5 s (and run), rejected after 10 s
with a hostile reason, and one left to expire (TTL 60 s). Call ids name the calls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from supervisor import ContextPolicy, MemAgentBuilder, governed_tool
from supervisor.ledger.clock import ManualClock
from supervisor.ledger.policy import ApprovalPolicy
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall
from support.agents import create_customer, inventory_lookup, side_effects

#: Untrusted text in a rule's reason and an operator's: bidi override, ESC, BEL, C1 CSI.
HOSTILE = "\u202eevil\x1b[2J\x07\x9b31m"
POLICY = f"""
[[rules]]
name = "small refunds"
verdict = "allow"
reason = "Refunds under 100 are routine"
tool = "issue_refund"
when = "args.amount < 100"

[[rules]]
name = "large refunds"
verdict = "deny"
reason = {json.dumps("Large refunds go to the desk " + HOSTILE)}
tool = "issue_refund"
when = "args.amount >= 100"
"""
ADA = {"name": "Ada", "email": "ada@example.com"}
EVE = {"name": "Eve", "email": "eve@example.com"}
BOB = {"name": "Bob", "email": "bob@example.com"}
#: Argument values that must never appear in an export.
ARGUMENT_VALUES = ("ada@example.com", "eve@example.com", "bob@example.com", '"o-2"')


@governed_tool(side_effects=True, domains=("billing",))
def issue_refund(order: str, amount: int) -> dict[str, Any]:
    """Refund an order."""
    return {"refunded": order, "amount": amount}


@dataclass(frozen=True)
class ApprovalRun:
    """The ledger URL and the proposal id of each call that has one (by call id)."""

    url: str
    ids: dict[str, str]


def approval_run(url: str) -> ApprovalRun:
    """Make the run on the ledger at ``url`` (``SIDE_EFFECT_FILE`` must be set)."""
    clock = ManualClock()
    turn = CallTools([
        ToolCall("inventory_lookup", {"sku": "A-1"}, id="look"),
        ToolCall("issue_refund", {"order": "o-1", "amount": 20}, id="small"),
        ToolCall("issue_refund", {"order": "o-2", "amount": 500}, id="large"),
        ToolCall("create_customer", ADA, id="ada"),
        ToolCall("create_customer", EVE, id="eve"),
        ToolCall("create_customer", BOB, id="bob"),
    ])  # fmt: skip
    with (
        SQLModelProvider(url, clock=clock) as provider,
        ScriptedModel([turn, Reply("Ada created; the rest did not run.")]) as model,
    ):
        provider.ledger.apply_policy(ApprovalPolicy.from_toml(POLICY, source="test"))
        config = {"provider": "openai", "model": "scripted-model", "base_url": model.base_url,
                  "api_key": "sk-test"}  # fmt: skip
        agent = (
            MemAgentBuilder().with_agent_id("crm-agent").with_llm_config(config)
            .with_memory_provider(provider)
            .with_tools([inventory_lookup, issue_refund, create_customer])
            .with_context_policy(ContextPolicy(approval_ttl_seconds=60)).build()
        )  # fmt: skip
        paused = agent.run("Refund and create the customers")
        assert paused.status == "awaiting_approval"
        asked = {proposal.call_id or "": proposal.proposal_id for proposal in paused.proposals}
        assert set(asked) == {"ada", "eve", "bob"}
        clock.advance(5)
        agent.approve(asked["ada"], approver_id="operator@example.com", reason="checked")
        assert agent.resume_approval(asked["ada"], continue_model=False).ok
        clock.advance(5)
        agent.reject(asked["eve"], approver_id="lead@example.com", reason="duplicate " + HOSTILE)
        clock.advance(55)
        finished = agent.resume_approval(asked["bob"], continue_model=True)
        assert finished.error_code == "expired"
        assert finished.assistant_response == "Ada created; the rest did not run."
        every = {p.call_id or "": p.proposal_id for p in provider.ledger.list(limit=50).items}
    assert side_effects() == ["create_customer Ada ada@example.com"]
    return ApprovalRun(url, every)
