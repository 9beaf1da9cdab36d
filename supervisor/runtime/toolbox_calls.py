"""The toolbox's two meta-tools as the runtime handles them.

``discover_tools`` answers with in-scope tools for a query. ``invoke_tool`` resolves a handle to
a governed tool (refusing unknown and out-of-scope handles) and hands it, with the arguments,
to the normal governed pipeline: validation, approval, outcomes and offloading all apply.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from supervisor.errors import SupervisorError
from supervisor.runtime.engine import refusal
from supervisor.runtime.llm import ModelToolCall, json_text
from supervisor.runtime.state import RunState

if TYPE_CHECKING:
    from supervisor.runtime.agent import MemAgent
    from supervisor.tools.governed import GovernedTool

    AnyTool = GovernedTool[..., Any]

DISCOVER = "discover_tools"
INVOKE = "invoke_tool"


def _arguments(call: ModelToolCall) -> dict[str, Any] | str:
    try:
        parsed = json.loads(call.arguments or "{}")
    except ValueError as exc:
        return refusal("invalid_json", f"The arguments are not valid JSON: {exc}.")
    if not isinstance(parsed, dict):
        return refusal("invalid_arguments", "The arguments must be a JSON object.")
    return parsed


def handle_meta_call(
    agent: MemAgent, call: ModelToolCall, state: RunState
) -> str | tuple[AnyTool, str] | None:
    """Answer a meta-tool call, or return the tool it invokes; ``None`` for other calls."""
    if call.name not in (DISCOVER, INVOKE):
        return None
    arguments = _arguments(call)
    if isinstance(arguments, str):
        return arguments
    policy = agent.config.context_policy
    if call.name == DISCOVER:
        query = arguments.get("query")
        limit = arguments.get("limit", policy.tool_top_k)
        if not isinstance(query, str) or not isinstance(limit, int) or isinstance(limit, bool):
            return refusal("invalid_arguments", "discover_tools takes query (string), limit (int).")
        found = agent.toolbox.discover(query, policy, max(1, min(limit, 50)))
        return json_text({"tools": found})
    handle = arguments.get("handle")
    if not isinstance(handle, str):
        return refusal("invalid_arguments", "invoke_tool takes handle (string) and arguments.")
    try:
        tool: AnyTool = agent.toolbox.resolve_handle(handle, policy, user_id=state.user_id)
    except SupervisorError as exc:
        return refusal(exc.code, exc.message)
    inner = arguments.get("arguments", {})
    return tool, inner if isinstance(inner, str) else json_text(inner)
