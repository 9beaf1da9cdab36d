"""Agent factories for ``supervisor run support.run_factories:NAME`` in tests.

The model comes from OPENAI_BASE_URL / OPENAI_API_KEY (a scripted model the test starts, e.g.
``ScriptedModel(crm_turn)``) and the ledger from SUPERVISOR_DB (or ``--db``). The tools are
``support.agents``'s, which count side effects in the file named by ``SIDE_EFFECT_FILE``.
"""

from __future__ import annotations

from supervisor import MemAgent, MemAgentBuilder
from supervisor.testing import CallTools, RecordedRequest, Reply, ToolCall, Turn
from support.agents import create_customer, inventory_lookup

#: What a test asks the CRM agent; :func:`crm_turn` answers it with a create_customer call.
CRM_QUERY = "Create the customer Ada Lovelace, ada@example.com."


def crm_turn(request: RecordedRequest) -> Turn:
    """The CRM agent's scripted model: create the customer asked for, then report the result."""
    last = request.messages[-1] if request.messages else {}
    if last.get("role") == "tool":
        return Reply(f"Done: {str(last.get('content', ''))[:160]}")
    if last.get("content") == CRM_QUERY:
        customer = {"name": "Ada Lovelace", "email": "ada@example.com"}
        return CallTools([ToolCall("create_customer", customer)])
    return Reply("I can only create the customer I was scripted for.")


def crm_builder() -> MemAgentBuilder:
    """A builder for a CRM agent whose create_customer call waits for approval."""
    return (
        MemAgentBuilder()
        .with_agent_id("run-crm")
        .with_name("Run CRM")
        .with_llm_config({"provider": "openai", "model": "scripted-model"})
        .with_tools([inventory_lookup, create_customer])
    )


def crm_agent() -> MemAgent:
    """The same agent, built and saved."""
    return crm_builder().build_and_save()


def not_an_agent() -> str:
    """A factory that returns the wrong thing (the runner refuses it)."""
    return "nope"
