"""A small ACP agent built with the ``agent-client-protocol`` SDK, for the relay tests.

On a prompt ``write NAME`` it announces a tool call that writes ``NAME`` (relative to the
session's cwd), asks its client for permission with distinctive option ids (``yes-once``,
``yes-always``, ``no-once``), writes the file only if an allow option came back, reports the
tool call ``completed`` or ``failed``, and says which option it got in a message chunk
(``chosen: <id>`` or ``chosen: cancelled``), followed by a chunk with a terminal escape
sequence (agent output is untrusted). Run with ``python tests/support/acp_agent.py``.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, Literal, cast

from acp import (
    PROTOCOL_VERSION,
    run_agent,
    start_tool_call,
    update_agent_message_text,
    update_tool_call,
)
from acp.interfaces import Agent, Client
from acp.schema import (
    AllowedOutcome,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallLocation,
    ToolCallUpdate,
)

OPTIONS = [
    PermissionOption(option_id="yes-once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="yes-always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="no-once", name="Reject", kind="reject_once"),
]
ALLOWING = {"yes-once", "yes-always"}
HOSTILE_TEXT = "\nend\x1b[2J\x1b]0;owned\x07"


class WritingAgent:
    """Writes one file per prompt, after asking."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.cwd: dict[str, str] = {}

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = f"sess-{uuid.uuid4().hex[:8]}"
        self.cwd[session_id] = cwd
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        assert self.client is not None
        text = " ".join(getattr(block, "text", "") for block in prompt).strip()
        name = text.removeprefix("write").strip() or "hello.txt"
        path = Path(self.cwd[session_id]) / name
        call_id = f"call-{uuid.uuid4().hex[:8]}"
        raw_input = {"path": str(path), "content": "hello from the agent\n"}
        await self.client.session_update(
            session_id,
            start_tool_call(call_id, f"Write {name}", kind="edit", status="pending",
                            locations=[ToolCallLocation(path=str(path))], raw_input=raw_input),
        )  # fmt: skip
        response = await self.client.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(
                tool_call_id=call_id, title=f"Write {name}", kind="edit", raw_input=raw_input
            ),
            options=OPTIONS,
        )
        outcome = response.outcome
        chosen = outcome.option_id if isinstance(outcome, AllowedOutcome) else "cancelled"
        status: Literal["completed", "failed"] = "failed"
        if chosen in ALLOWING:
            path.write_text(raw_input["content"], encoding="utf-8")
            status = "completed"
        await self.client.session_update(session_id, update_tool_call(call_id, status=status))
        await self.client.session_update(session_id, update_agent_message_text(f"chosen: {chosen}"))
        await self.client.session_update(session_id, update_agent_message_text(HOSTILE_TEXT))
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    # The agent implements what it needs; the SDK answers method_not_found for the rest.
    asyncio.run(run_agent(cast(Agent, WritingAgent())))
