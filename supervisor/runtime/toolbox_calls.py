"""The toolbox's two meta-tools as the runtime handles them.

``discover_tools`` answers with in-scope tools for a query. ``invoke_tool`` resolves a handle to
a governed tool (refusing unknown and out-of-scope handles) and hands it, with the arguments,
to the normal governed pipeline: validation, approval, outcomes and offloading all apply.

A handle or name outside the caller's scope (another user's tool, a denied domain) is refused
with exactly the answer an unknown handle or name gets, so the model cannot tell that it exists;
the host's outcome keeps the real reason, ``tool_out_of_scope``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.runtime.engine import Refusal, unknown_tool
from supervisor.runtime.llm import ModelToolCall, json_text
from supervisor.runtime.state import RunState
from supervisor.toolbox import (
    DISCOVER_TOOL_NAME,
    INVOKE_TOOL_NAME,
    ToolboxError,
    ToolOutOfScope,
    UnknownToolHandle,
    parse_discovery,
    parse_invocation,
)

if TYPE_CHECKING:
    from supervisor.runtime.agent import MemAgent
    from supervisor.tools.governed import GovernedTool

    AnyTool = GovernedTool[..., Any]


def unknown_handle(handle: str, reason_code: str = UnknownToolHandle.code) -> Refusal:
    """The answer to an ``invoke_tool`` handle the caller may not use, whether or not it exists."""
    return Refusal(UnknownToolHandle.code, f"No tool has the handle {handle!r}.", reason_code)


def handle_meta_call(
    agent: MemAgent, call: ModelToolCall, state: RunState
) -> Refusal | str | tuple[AnyTool, str] | None:
    """Answer a meta-tool call, or return the tool it invokes; ``None`` for other calls."""
    toolbox = agent.toolbox
    policy = agent.config.context_policy
    try:
        if call.name == DISCOVER_TOOL_NAME:
            discovery = parse_discovery(call.arguments or "{}")
            found = toolbox.discover(
                discovery.query, policy, discovery.limit, user_id=state.user_id
            )
            return json_text({"tools": found})
        if call.name == INVOKE_TOOL_NAME:
            invocation = parse_invocation(call.arguments or "{}")
            try:
                tool: AnyTool = toolbox.resolve_handle(invocation.handle, policy, state.user_id)
            except UnknownToolHandle:
                return unknown_handle(invocation.handle)
            except ToolOutOfScope:
                return unknown_handle(invocation.handle, ToolOutOfScope.code)
            return tool, json_text(invocation.arguments)
        if call.name in toolbox:
            try:
                named: AnyTool = toolbox.resolve_name(call.name, policy, state.user_id)
            except UnknownToolHandle:
                return unknown_tool(call.name)
            except ToolOutOfScope:
                return unknown_tool(call.name, ToolOutOfScope.code)
            return named, call.arguments
    except ToolboxError as exc:
        return Refusal(exc.code, exc.message)
    return None
