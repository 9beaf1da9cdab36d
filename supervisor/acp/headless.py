"""``supervisor acp --prompt TEXT -- AGENT...``: the supervisor is the ACP client itself.

For scripts and tests: it starts the agent, opens one session (``--cwd``), sends one prompt,
prints the agent's message text as it streams (escaped: agent output is data), answers
permission requests through the ledger like the relay does, and ends with the turn's stop
reason. It offers the agent no file system and no terminal, so everything the agent does to
the machine it does itself, after asking.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import (
    ClientCapabilities,
    Implementation,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from supervisor.acp.gate import AcpGate
from supervisor.acp.permission import ToolCalls, read_ask, response_of
from supervisor.acp.relay import LINE_LIMIT, in_own_thread, turn_id
from supervisor.services.rendering import visible_escapes
from supervisor.version import __version__

if TYPE_CHECKING:
    from acp.interfaces import Client

#: Exit code per stop reason; anything not listed is 1.
STOP_EXIT_CODES = {"end_turn": 0, "cancelled": 130}


def plain_text(text: str) -> str:
    """Agent text as printed: its newlines kept, every other hidden character escaped."""
    return "\n".join(visible_escapes(part) for part in text.split("\n"))


class HeadlessClient:
    """The ACP client side: message text to ``write``, permission requests to the gate.

    Args:
        gate: The ledger side.
        write: Where the agent's message text goes (already escaped).
    """

    def __init__(self, gate: AcpGate, write: Callable[[str], object]) -> None:
        self.gate = gate
        self.write = write
        self.cwd: dict[str, str] = {}
        self.turn: dict[str, str] = {}
        self.tool_calls = ToolCalls()
        self.wrote_text = False

    async def request_permission(
        self,
        options: list[PermissionOption],
        session_id: str,
        tool_call: ToolCallUpdate,
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        """Decide through the ledger and answer with one of the agent's options."""
        params = {
            "sessionId": session_id,
            "toolCall": tool_call.model_dump(mode="json", by_alias=True, exclude_none=True),
            "options": [o.model_dump(mode="json", by_alias=True, exclude_none=True)
                        for o in options],
        }  # fmt: skip
        ask = read_ask(params, self.tool_calls.known(session_id, tool_call.tool_call_id))
        decided = await in_own_thread(
            self.gate.decide, ask, turn_id=self.turn.get(session_id),
            cwd=self.cwd.get(session_id),
        )  # fmt: skip
        return response_of(decided.answer)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Print message text; follow tool calls to finish the claimed ones."""
        data: dict[str, Any] = update.model_dump(mode="json", by_alias=True, exclude_none=True)
        if data.get("sessionUpdate") == "agent_message_chunk":
            content = data.get("content") or {}
            if content.get("type") == "text" and isinstance(content.get("text"), str):
                self.write(plain_text(content["text"]))
                self.wrote_text = True
            return
        merged = self.tool_calls.update(session_id, data)
        if merged is not None and merged.get("status") in ("completed", "failed"):
            await asyncio.to_thread(
                self.gate.tool_status, session_id, str(data.get("toolCallId")), merged["status"]
            )


async def run_headless(
    gate: AcpGate,
    argv: list[str],
    env: dict[str, str],
    *,
    prompt: str,
    cwd: str,
    write: Callable[[str], object],
) -> str:
    """Start the agent, send one prompt in a new session and return the stop reason."""
    client = HeadlessClient(gate, write)
    # The client implements only what it offers; the SDK answers method_not_found for the rest.
    as_client = cast("Client", client)
    try:
        async with spawn_agent_process(
            as_client, argv[0], *argv[1:], env=env,
            transport_kwargs={"stderr": None, "limit": LINE_LIMIT},
        ) as (connection, _process):  # fmt: skip
            await connection.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="agent-supervisor", version=__version__),
            )
            session = await connection.new_session(cwd=cwd, mcp_servers=[])
            client.cwd[session.session_id] = cwd
            client.turn[session.session_id] = turn_id()
            response = await connection.prompt(
                session_id=session.session_id, prompt=[text_block(prompt)]
            )
    finally:
        await asyncio.to_thread(gate.close)
    if client.wrote_text:
        write("\n")
    return str(response.stop_reason)
