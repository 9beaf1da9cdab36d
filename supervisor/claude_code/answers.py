"""What the hook prints: Claude Code's documented hook output, one JSON object on stdout.

``PreToolUse`` answers in ``hookSpecificOutput.permissionDecision`` (``allow`` / ``deny``, with
``permissionDecisionReason`` shown to the model on deny and ``updatedInput`` replacing the
tool input on an operator's edit); ``PermissionRequest`` answers in
``hookSpecificOutput.decision`` (``behavior`` ``allow`` with ``updatedInput``, or ``deny``
with ``message``). Errors never produce an allow: the command prints the error on stderr and
exits 2, which Claude Code treats as a block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, assert_never

from supervisor.claude_code.events import EventName

#: Exit code that makes Claude Code block the tool call and show stderr to the model.
BLOCKING_EXIT_CODE = 2


@dataclass(frozen=True)
class Allow:
    """Let the call run; with ``updated_input``, run those arguments instead (an edit)."""

    reason: str
    updated_input: dict[str, Any] | None = None


@dataclass(frozen=True)
class Deny:
    """Do not run the call; ``reason`` is what the model is told."""

    reason: str


Answer = Allow | Deny


def hook_output(event_name: EventName, answer: Answer) -> dict[str, Any]:
    """The JSON object the hook prints for ``answer`` to an ``event_name`` event.

    Raises:
        ValueError: ``event_name`` is not a permission event (``PostToolUse`` gets no answer).
    """
    if event_name == "PreToolUse":
        return {"hookSpecificOutput": _pre_tool_use(answer)}
    if event_name == "PermissionRequest":
        return {"hookSpecificOutput": _permission_request(answer)}
    raise ValueError(f"{event_name} takes no permission answer")


def _pre_tool_use(answer: Answer) -> dict[str, Any]:
    output: dict[str, Any] = {"hookEventName": "PreToolUse"}
    match answer:
        case Allow(reason=reason, updated_input=updated):
            output |= {"permissionDecision": "allow", "permissionDecisionReason": reason}
            if updated is not None:
                output["updatedInput"] = updated
        case Deny(reason=reason):
            output |= {"permissionDecision": "deny", "permissionDecisionReason": reason}
        case _:
            assert_never(answer)
    return output


def _permission_request(answer: Answer) -> dict[str, Any]:
    decision: dict[str, Any]
    match answer:
        case Allow(updated_input=updated):
            decision = {"behavior": "allow"}
            if updated is not None:
                decision["updatedInput"] = updated
        case Deny(reason=reason):
            decision = {"behavior": "deny", "message": reason}
        case _:
            assert_never(answer)
    return {"hookEventName": "PermissionRequest", "decision": decision}
