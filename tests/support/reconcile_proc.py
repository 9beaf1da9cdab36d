"""Entry points of the crash-and-reconcile tests, run as real subprocesses.

    python -m support.reconcile_proc pause QUERY   -> prints the pending proposal ids (JSON)
    python -m support.reconcile_proc resume ID     -> resume_approval(continue_model=True), JSON

The agent runs ``support.blocking_tools.charge_card``; the ledger comes from SUPERVISOR_DB and
the model from OPENAI_BASE_URL / OPENAI_API_KEY.
"""

from __future__ import annotations

import json
import sys

from supervisor import MemAgent, MemAgentBuilder, SQLModelProvider

AGENT_ID = "billing-agent"


def main(argv: list[str]) -> int:
    command, argument = argv
    if command == "pause":
        from support.blocking_tools import charge_card

        agent = (
            MemAgentBuilder()
            .with_agent_id(AGENT_ID)
            .with_name("Billing")
            .with_llm_config({"provider": "openai", "model": "scripted-model"})
            .with_tools([charge_card])
            .build_and_save()
        )
        result = agent.run(argument)
        print(json.dumps([proposal.proposal_id for proposal in result.proposals]), flush=True)
        return 0
    assert command == "resume"
    agent = MemAgent.load(
        AGENT_ID, memory_provider=SQLModelProvider(), allowlist=["support.blocking_tools:*"]
    )
    print("resuming", flush=True)
    resumed = agent.resume_approval(argument, continue_model=True)
    print(
        json.dumps(
            {
                "consumed": resumed.consumed,
                "ok": resumed.ok,
                "error_code": resumed.error_code,
                "tool_result": resumed.tool_result,
                "assistant_response": resumed.assistant_response,
                "status": resumed.proposal.status.value,
                "outcome": resumed.outcome.as_dict() if resumed.outcome else None,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
