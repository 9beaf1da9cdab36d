"""Resume one proposal of the ops agent in this process and print the result as JSON.

    python -m support.turn_proc resume ID   -> {"assistant_response", "error_code", "turn_holder"}

The agent was saved by ``support.runtime_proc pause``; the ledger comes from SUPERVISOR_DB, the
model from OPENAI_BASE_URL / OPENAI_API_KEY and the lease length from SUPERVISOR_LEASE_SECONDS.
"""

from __future__ import annotations

import json
import sys

from supervisor import MemAgent, SQLModelProvider
from support.runtime_proc import AGENT_ID


def main(argv: list[str]) -> int:
    command, proposal_id = argv
    assert command == "resume"
    agent = MemAgent.load(AGENT_ID, memory_provider=SQLModelProvider(),
                          allowlist=["support.agents:*"])  # fmt: skip
    print("resuming", flush=True)
    resumed = agent.resume_approval(proposal_id, continue_model=True)
    print(
        json.dumps(
            {
                "assistant_response": resumed.assistant_response,
                "error_code": resumed.error_code,
                "turn_holder": resumed.turn_holder,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
