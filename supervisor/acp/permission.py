"""An ACP ``session/request_permission`` as a ledger call, and the answer the agent gets.

Everything here comes from the agent and is untrusted: it is validated with the SDK's schema,
kept as JSON data, and never used to pick an option id the agent did not offer.

Which option an approval sends: the offered ``allow_once`` option; only when the agent offers
none, its ``allow_always`` option (the proposal says so before anyone decides, since the agent
may then stop asking for similar calls). A rejection, an expiry or a withdrawal sends the
``reject_once`` option, or the ``cancelled`` outcome when there is none: the supervisor never
answers ``reject_always`` or ``allow_always`` on its own, and never invents an option id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    RequestPermissionRequest,
    RequestPermissionResponse,
)

#: Tool-call fields the proposal's arguments are made of (their ACP JSON names).
ARGUMENT_FIELDS = ("title", "rawInput", "content", "locations")
#: Tool-call fields merged from ``tool_call`` / ``tool_call_update`` session updates.
TRACKED_FIELDS = ("title", "kind", "status", "rawInput", "content", "locations")
MAX_TOOL_NAME = 200


@dataclass(frozen=True)
class OfferedOption:
    """One option the agent offered: its own id, its label and its kind."""

    option_id: str
    name: str
    kind: str

    def as_json(self) -> dict[str, str]:
        """The option as the proposal records it."""
        return {"optionId": self.option_id, "name": self.name, "kind": self.kind}


@dataclass(frozen=True)
class Selected:
    """Answer with this offered option."""

    option_id: str


@dataclass(frozen=True)
class Cancelled:
    """Answer with the ``cancelled`` outcome (the prompt was cancelled, or no option fits)."""


Answer = Selected | Cancelled


@dataclass(frozen=True)
class PermissionAsk:
    """One permission request: the tool call it is about and the options offered."""

    session_id: str
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    options: tuple[OfferedOption, ...]

    @property
    def approve_option(self) -> OfferedOption | None:
        """The option an approval answers with (see the module docstring)."""
        return _first(self.options, "allow_once") or _first(self.options, "allow_always")

    @property
    def reject_option(self) -> OfferedOption | None:
        """The option a rejection, expiry or withdrawal answers with, if offered."""
        return _first(self.options, "reject_once")

    def approved(self) -> Answer:
        """The answer to an approval: the approve option, else ``cancelled``."""
        option = self.approve_option
        return Selected(option.option_id) if option is not None else Cancelled()

    def refused(self) -> Answer:
        """The answer to anything but an approval: ``reject_once``, else ``cancelled``."""
        option = self.reject_option
        return Selected(option.option_id) if option is not None else Cancelled()


def _first(options: tuple[OfferedOption, ...], kind: str) -> OfferedOption | None:
    return next((option for option in options if option.kind == kind), None)


def read_ask(params: Any, known: Mapping[str, Any] | None = None) -> PermissionAsk:
    """Validate ``session/request_permission`` params and make the call they ask about.

    Args:
        params: The request's params, as JSON data.
        known: What earlier ``tool_call`` updates said about the same tool call; the
            request's own fields win.

    Raises:
        ValueError: The params are not a valid permission request (pydantic's error).
    """
    request = RequestPermissionRequest.model_validate(params)
    asked = request.tool_call.model_dump(mode="json", by_alias=True, exclude_none=True)
    tool_call: dict[str, Any] = {**(known or {}), **asked}
    arguments = {name: tool_call[name] for name in ARGUMENT_FIELDS if name in tool_call}
    options = tuple(
        OfferedOption(option_id=option.option_id, name=option.name, kind=option.kind)
        for option in request.options
    )
    return PermissionAsk(
        session_id=request.session_id,
        tool_call_id=request.tool_call.tool_call_id,
        tool_name=tool_name_of(tool_call),
        arguments=arguments,
        options=options,
    )


def tool_name_of(tool_call: Mapping[str, Any]) -> str:
    """The proposal's tool name: the call's ACP kind (``edit``, ``execute``...; what rules
    match), else its title, else ``other``."""
    for key in ("kind", "title"):
        value = tool_call.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:MAX_TOOL_NAME]
    return "other"


def response_of(answer: Answer) -> RequestPermissionResponse:
    """The SDK response object for ``answer``."""
    match answer:
        case Selected(option_id=option_id):
            return RequestPermissionResponse(
                outcome=AllowedOutcome(outcome="selected", option_id=option_id)
            )
        case Cancelled():
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


def response_json(answer: Answer) -> dict[str, Any]:
    """The JSON-RPC ``result`` for ``answer``."""
    return response_of(answer).model_dump(mode="json", by_alias=True, exclude_none=True)


@dataclass
class ToolCalls:
    """What the agent's ``session/update`` notifications said about each tool call so far."""

    calls: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def update(self, session_id: str, update: Mapping[str, Any]) -> dict[str, Any] | None:
        """Merge a ``tool_call`` or ``tool_call_update`` update; returns the merged call, or
        ``None`` for any other kind of update."""
        if update.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
            return None
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            return None
        merged = self.calls.setdefault((session_id, call_id), {})
        merged.update({k: update[k] for k in TRACKED_FIELDS if update.get(k) is not None})
        return merged

    def known(self, session_id: str, tool_call_id: str) -> dict[str, Any]:
        """What is known of one tool call (empty when nothing was said)."""
        return dict(self.calls.get((session_id, tool_call_id), {}))
