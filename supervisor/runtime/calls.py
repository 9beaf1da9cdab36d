"""From a model's tool call to a governed tool, and from its result to what the model receives.

Resolution: a call names a registry tool, or one of the toolbox's meta-tools.
``discover_tools`` answers with in-scope tools for a query; ``invoke_tool`` resolves a handle to
a governed tool and hands it, with the arguments, to the normal governed pipeline (validation,
approval, outcomes and offloading all apply). A tool, handle or name outside the caller's scope
(another user's tool, a denied domain) is refused with exactly the answer an unknown one gets,
so the model cannot tell that it exists; the host's outcome keeps the real reason,
``tool_out_of_scope``.

Delivery: every result passes here before it reaches the model or a checkpoint. A result whose
JSON text is longer than ``ContextPolicy.max_result_chars`` never goes out whole: with
offloading configured it is stored and the model gets a pointer (whatever
``offload_above_chars`` says); without, the model gets a ``result_too_large`` error instead and
the outcome says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from supervisor.runtime.context import RuntimeContext
from supervisor.runtime.llm import ModelToolCall, json_text
from supervisor.runtime.offload import NEVER_OFFLOAD
from supervisor.runtime.results import refusal
from supervisor.runtime.state import RunState
from supervisor.runtime.trace import RunTracer
from supervisor.toolbox import (
    DISCOVER_TOOL_NAME,
    INVOKE_TOOL_NAME,
    ToolboxError,
    ToolOutOfScope,
    UnknownToolHandle,
    parse_discovery,
    parse_invocation,
)
from supervisor.tools.dispatch import ToolCallResult, error_result
from supervisor.tools.errors import ToolCallError

if TYPE_CHECKING:
    from supervisor.tools.contract import Tool

    AnyTool = Tool


@dataclass(frozen=True)
class Refusal:
    """A call refused before it reached a tool: what the model is told, and why.

    Attributes:
        code: The code the model sees.
        message: The sentence the model sees.
        reason_code: The outcome's reason code for the host (traces, ``last_tool_outcomes``);
            it may be more precise than ``code``, e.g. ``tool_out_of_scope`` where the model
            is told ``unknown_tool`` so it learns nothing about tools it may not call.
    """

    code: str
    message: str
    reason_code: str = ""

    @property
    def content(self) -> str:
        """The tool message content."""
        return refusal(self.code, self.message)


def unknown_tool(name: str, reason_code: str = "unknown_tool") -> Refusal:
    """The answer to a call of a tool the caller may not see, whether or not it exists."""
    return Refusal("unknown_tool", f"There is no tool named {name!r}.", reason_code)


def unknown_handle(handle: str, reason_code: str = UnknownToolHandle.code) -> Refusal:
    """The answer to an ``invoke_tool`` handle the caller may not use, whether or not it exists."""
    return Refusal(UnknownToolHandle.code, f"No tool has the handle {handle!r}.", reason_code)


# -- what the model is offered ---------------------------------------------------------------


def in_scope(context: RuntimeContext, tool: AnyTool) -> bool:
    """Whether the context policy lets the model see and call ``tool``."""
    return context.policy.permits(tool.name, tool.policy.domains)


def tool_payload(
    context: RuntimeContext, messages: list[dict[str, Any]], state: RunState, tracer: RunTracer
) -> list[dict[str, Any]]:
    """The tool definitions sent with the next model request."""
    toolbox = context.toolbox
    if toolbox is not None:
        query = _last_user_text(messages)
        selection = toolbox.select(query, context.policy, user_id=state.user_id)
        state.toolbox_state = {"revealed": [tool.name for tool in selection.tools]}
        tracer.event("tools_revealed", **selection.trace())
        definitions: list[dict[str, Any]] = list(toolbox.meta_tool_definitions())
        definitions.extend(selection.openai_definitions())
        if context.offloader is not None:
            definitions.extend(
                tool.openai.definition for tool in context.tools if tool.name in NEVER_OFFLOAD
            )
        return definitions
    return [tool.openai.definition for tool in context.tools if in_scope(context, tool)]


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


# -- resolution ------------------------------------------------------------------------------


def resolve_call(
    context: RuntimeContext, call: ModelToolCall, state: RunState
) -> Refusal | str | tuple[AnyTool, str]:
    """The tool and arguments a model call names, a meta-tool's answer text, or a refusal.

    A tool outside the caller's scope is refused exactly like a tool that does not exist,
    so the model cannot probe which tools other users or agents have.
    """
    resolved = toolbox_call(context, call, state)
    if resolved is not None:
        return resolved
    if call.name not in context.tools:
        return unknown_tool(call.name)
    tool = context.tools.get(call.name)
    if not in_scope(context, tool):
        return unknown_tool(call.name, "tool_out_of_scope")
    return tool, call.arguments


def toolbox_call(
    context: RuntimeContext, call: ModelToolCall, state: RunState
) -> Refusal | str | tuple[AnyTool, str] | None:
    """Answer a meta-tool call, or return the tool it invokes; ``None`` for other calls (and
    for every call when the agent has no toolbox)."""
    toolbox = context.toolbox
    if toolbox is None:
        return None
    policy = context.policy
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


# -- delivery --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivered result.

    Attributes:
        content: The tool message text for the model.
        blob_ref: ``sha256:<hex>`` of the stored result when it was offloaded, else None.
        result: The call's result as the model experienced it: the tool's own, or a
            ``result_too_large`` error result when it was refused for its size.
    """

    content: str
    blob_ref: str | None
    result: ToolCallResult


def deliver(
    context: RuntimeContext, tool_name: str, call_id: str, result: ToolCallResult
) -> Delivery:
    """What the model receives for a result: inline, a pointer to a stored blob, or a
    ``result_too_large`` refusal (see the module docstring)."""
    offloader, max_chars = context.offloader, context.policy.max_result_chars
    content = result.model_content()
    too_large = len(content) > max_chars
    if offloader is not None:
        decision = offloader.offload(tool_name, call_id, content, force=too_large)
        if decision.offloaded or not too_large:
            return Delivery(decision.model_content, decision.digest, result)
    if not too_large:
        return Delivery(content, None, result)
    error = ToolCallError(
        "result_too_large",
        f"{tool_name} returned {len(content):,} characters of JSON; at most {max_chars:,} "
        "reach the model, so the result was not delivered. Ask for less (a filter, a page, "
        "fewer fields).",
        tool_name,
        detail=f"{len(content)} characters > max_result_chars={max_chars}",
    )
    refused = error_result(tool_name, error)
    return Delivery(refused.model_content(), None, refused)
