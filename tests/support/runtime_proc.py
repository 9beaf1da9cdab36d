"""Entry points the cross-process tests run as real subprocesses.

    python -m support.runtime_proc pause QUERY        -> prints the pending proposal ids
    python -m support.runtime_proc wait-resume ID     -> waits for a decision (following edits),
                                                         resumes, prints JSON
    python -m support.runtime_proc approve ID         -> approves through the SDK
    python -m support.runtime_proc resume ID          -> resumes once, prints JSON

The ledger comes from SUPERVISOR_DB and the model from OPENAI_BASE_URL / OPENAI_API_KEY.
"""

from __future__ import annotations

import json
import sys

from supervisor import MemAgent, MemAgentBuilder, SQLModelProvider

AGENT_ID = "ops-agent"


def _load() -> MemAgent:
    return MemAgent.load(
        AGENT_ID, memory_provider=SQLModelProvider(), allowlist=["support.agents:*"]
    )


def main(argv: list[str]) -> int:
    command, argument = argv[0], argv[1]
    if command == "pause":
        from support.agents import create_customer, inventory_lookup

        agent = (
            MemAgentBuilder()
            .with_agent_id(AGENT_ID)
            .with_name("Operations")
            .with_llm_config({"provider": "openai", "model": "scripted-model"})
            .with_tools([inventory_lookup, create_customer])
            .build_and_save()
        )
        result = agent.run(argument)
        print(json.dumps([proposal.proposal_id for proposal in result.proposals]), flush=True)
        return 0
    if command == "approve":
        SQLModelProvider().ledger.approve(argument, "operator@example.com", "reviewed")
        return 0
    agent = _load()
    if command == "wait-resume":
        print("waiting", flush=True)
        agent.wait_for_decision(argument, timeout=60)
    resumed = agent.resume_approval(argument, continue_model=True)
    print(
        json.dumps(
            {
                "consumed": resumed.consumed,
                "ok": resumed.ok,
                "error_code": resumed.error_code,
                "assistant_response": resumed.assistant_response,
                "status": resumed.proposal.status.value,
                "proposal_id": resumed.proposal.proposal_id,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
