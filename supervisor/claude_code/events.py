"""The hook events Claude Code writes on a command hook's stdin, read strictly.

Everything in an event is untrusted data (the model wrote the tool input): it is validated
here, stored as JSON and never executed or parsed as markup by the supervisor.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from supervisor.errors import SupervisorError

#: The events ``supervisor hook claude-code`` answers.
EventName = Literal["PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure"]

#: Largest event read from stdin (a tool input or result bigger than this is refused).
MAX_EVENT_BYTES = 16 * 1024 * 1024


class HookInputInvalid(SupervisorError, ValueError):
    """The hook's stdin is not a Claude Code hook event it can answer."""

    code = "claude_code_hook_input_invalid"


class HookEvent(BaseModel):
    """One Claude Code hook event (the fields the supervisor uses; others are ignored).

    Attributes:
        hook_event_name: Which event.
        session_id: The Claude Code session (the proposal's thread).
        transcript_path: The session's JSONL transcript (where the assistant turn is found).
        cwd: Claude Code's working directory when the hook ran.
        tool_name: The tool (``Bash``, ``Write``, ``mcp__server__tool``...).
        tool_input: The tool's arguments as the model gave them.
        tool_use_id: The model's tool-use id (the proposal's call id); Claude Code sends it
            with tool events, a ``PermissionRequest`` may lack it.
        tool_response: The tool's result (``PostToolUse``).
        error: What went wrong (``PostToolUseFailure``).
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    hook_event_name: EventName
    session_id: str = Field(min_length=1, max_length=200)
    transcript_path: str | None = None
    cwd: str = ""
    tool_name: str = Field(min_length=1, max_length=200)
    tool_input: dict[str, Any] = Field(default_factory=dict)
    tool_use_id: str | None = Field(default=None, max_length=200)
    tool_response: Any = None
    error: Any = None


def parse_event(raw: bytes) -> HookEvent:
    """Read one hook event from stdin bytes.

    Raises:
        HookInputInvalid: Not UTF-8 JSON, not an object, an event this hook does not answer,
            or a required field missing or of the wrong type.
    """
    hint = "Install the hook with `supervisor hook install claude-code`; Claude Code writes it."
    if len(raw) > MAX_EVENT_BYTES:
        raise HookInputInvalid(f"The hook event is larger than {MAX_EVENT_BYTES} bytes.", hint=hint)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise HookInputInvalid(f"The hook's stdin is not JSON: {error}.", hint=hint) from None
    if not isinstance(data, dict):
        raise HookInputInvalid("The hook event is not a JSON object.", hint=hint)
    try:
        return HookEvent.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in issue['loc']) or 'event'}: {issue['msg']}"
            for issue in error.errors()[:5]
        )
        raise HookInputInvalid(f"Not a Claude Code tool event: {problems}.", hint=hint) from None
