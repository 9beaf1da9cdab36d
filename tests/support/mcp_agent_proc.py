"""The agent side of the MCP gate tests, run as real subprocesses.

    python -m support.mcp_agent_proc pause QUERY     -> prints proposal ids, then waits to be killed
    python -m support.mcp_agent_proc resume ID       -> rebuilds with the builder, resumes once
    python -m support.mcp_agent_proc resume-load ID  -> MemAgent.load(tools=mcp_tools(...)), resumes

The ledger comes from SUPERVISOR_DB, the model from OPENAI_BASE_URL / OPENAI_API_KEY and the MCP
server's count file from MCP_COUNT_FILE.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from supervisor import MemAgent, MemAgentBuilder, SQLModelProvider
from supervisor.mcp import close_mcp_tools, mcp_server, mcp_tools

AGENT_ID = "mcp-agent"
SERVER_SCRIPT = str(Path(__file__).with_name("mcp_server.py"))


def server_env() -> dict[str, str]:
    """Environment for the test MCP server."""
    return {
        "MCP_COUNT_FILE": os.environ["MCP_COUNT_FILE"],
        "MCP_SCHEMA_VARIANT": os.environ.get("MCP_SCHEMA_VARIANT", "1"),
    }


def build(provider: SQLModelProvider) -> MemAgent:
    """The agent with the test server attached (untrusted)."""
    return (
        MemAgentBuilder()
        .with_agent_id(AGENT_ID)
        .with_name("MCP agent")
        .with_llm_config({"provider": "openai", "model": "scripted-model"})
        .with_memory_provider(provider)
        .with_mcp_server("inv", command=[sys.executable, SERVER_SCRIPT], env=server_env())
        .build_and_save()
    )


def _report(agent: MemAgent, proposal_id: str) -> None:
    resumed = agent.resume_approval(proposal_id, continue_model=False)
    print(
        json.dumps(
            {
                "consumed": resumed.consumed,
                "ok": resumed.ok,
                "error_code": resumed.error_code,
                "status": resumed.proposal.status.value,
                "tool_result": resumed.tool_result,
            }
        ),
        flush=True,
    )


def main(argv: list[str]) -> int:
    """Run one command (see the module docstring)."""
    command, argument = argv[0], argv[1]
    provider = SQLModelProvider()
    if command == "pause":
        agent = build(provider)
        result = agent.run(argument)
        print(json.dumps([proposal.proposal_id for proposal in result.proposals]), flush=True)
        while True:  # stay alive, holding the MCP session, until the test kills us
            time.sleep(1)
    if command == "resume":
        agent = build(provider)
        _report(agent, argument)
        close_mcp_tools(agent.tools)
        return 0
    config = mcp_server("inv", command=[sys.executable, SERVER_SCRIPT], env=server_env())
    tools = mcp_tools([config], ledger=provider.ledger, agent_id=AGENT_ID)
    agent = MemAgent.load(AGENT_ID, memory_provider=provider, tools=tools)
    _report(agent, argument)
    close_mcp_tools(tools)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
