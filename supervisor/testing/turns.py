"""What the scripted model answers: turn types and the strict JSON script format.

A turn is one scripted answer to one chat-completion request. The Python types are small frozen
dataclasses so tests can write ``Reply("hi")``; the JSON file format used by the command line is
parsed strictly with pydantic and converted to the same types, so both paths behave alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError

from supervisor.errors import SupervisorError

__all__ = [
    "CallTools",
    "Delay",
    "Fail",
    "Reply",
    "ScriptError",
    "ToolCall",
    "Turn",
    "load_script",
    "parse_script",
]


class ScriptError(SupervisorError, ValueError):
    """A scripted-model script (a JSON file or turn list) is malformed."""

    code = "invalid_model_script"


@dataclass(frozen=True)
class Reply:
    """An assistant text message, answered with ``finish_reason="stop"``.

    Args:
        content: The assistant's text.
    """

    content: str


@dataclass(frozen=True)
class ToolCall:
    """One function call inside a `CallTools` turn.

    Args:
        name: The function name the model "chooses".
        arguments: A dict is sent as JSON text; a str is sent verbatim, so a test can send
            malformed JSON on purpose.
        id: The tool-call id; when None the server assigns ``call_<n>`` from a per-server
            counter, so ids are unique within a run and identical across runs.
    """

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ScriptError("A scripted tool call needs a non-empty function name.")

    def arguments_text(self) -> str:
        """The arguments exactly as they go on the wire (JSON text)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class CallTools:
    """An assistant message with ``tool_calls`` (several calls = parallel tool calls).

    Args:
        calls: The calls, in order; at least one.
        content: Optional assistant text sent alongside the calls (usually None).
    """

    calls: list[ToolCall]
    content: str | None = None

    def __post_init__(self) -> None:
        if not self.calls:
            raise ScriptError("CallTools needs at least one ToolCall.")


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error status and an OpenAI-style error body.

    Args:
        status: An HTTP error status (400-599), e.g. 429, 500 or 503 to exercise retries.
        message: The error message; defaults to one naming the status.
        times: In a list script, how many consecutive requests get this failure before the
            script moves on. A callable script decides per request, so it is ignored there.
        retry_after: When set, sent as ``retry-after-ms`` so clients wait that many seconds
            before retrying (keeps retry tests fast and deterministic).
    """

    status: int
    message: str = ""
    times: int = 1
    retry_after: float | None = None

    def __post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            raise ScriptError(f"Fail status must be an HTTP error (400-599), got {self.status}.")
        if self.times < 1:
            raise ScriptError(f"Fail times must be at least 1, got {self.times}.")
        if self.retry_after is not None and self.retry_after < 0:
            raise ScriptError(f"Fail retry_after must be >= 0, got {self.retry_after}.")

    def error_message(self) -> str:
        """The message sent in the error body (the given one or a default naming the status)."""
        if self.message:
            return self.message
        try:
            phrase = HTTPStatus(self.status).phrase
        except ValueError:
            phrase = "Error"
        return f"scripted failure: {self.status} {phrase}"


@dataclass(frozen=True)
class Delay:
    """Wait, then answer with another turn (for client timeout and cancellation tests).

    Args:
        seconds: How long to wait before answering; stopping the server cuts the wait short.
        then: The turn answered after the wait.
    """

    seconds: float
    then: Reply | CallTools | Fail | Delay

    def __post_init__(self) -> None:
        if self.seconds < 0:
            raise ScriptError(f"Delay seconds must be >= 0, got {self.seconds}.")


Turn = Reply | CallTools | Fail | Delay
"""One scripted answer to one chat-completion request."""


# JSON script format, parsed strictly: unknown keys and wrong types are errors.

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)
_TURN_KEYS = ("reply", "tool_calls", "fail", "delay")


class _ReplyEntry(BaseModel):
    model_config = _STRICT
    reply: str


class _ToolCallEntry(BaseModel):
    model_config = _STRICT
    name: Annotated[str, Field(min_length=1)]
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class _CallToolsEntry(BaseModel):
    model_config = _STRICT
    tool_calls: Annotated[list[_ToolCallEntry], Field(min_length=1)]
    content: str | None = None


class _FailEntry(BaseModel):
    model_config = _STRICT
    fail: Annotated[int, Field(ge=400, le=599)]
    message: str = ""
    times: Annotated[int, Field(ge=1)] = 1
    retry_after: Annotated[float, Field(ge=0)] | None = None


class _DelayEntry(BaseModel):
    model_config = _STRICT
    delay: Annotated[float, Field(ge=0)]
    then: _Entry


def _entry_kind(value: Any) -> str | None:
    """Names the turn kind by the one turn key the object carries (None if not exactly one)."""
    if not isinstance(value, dict):
        return None
    present = [key for key in _TURN_KEYS if key in value]
    return present[0] if len(present) == 1 else None


_Entry = Annotated[
    Annotated[_ReplyEntry, Tag("reply")]
    | Annotated[_CallToolsEntry, Tag("tool_calls")]
    | Annotated[_FailEntry, Tag("fail")]
    | Annotated[_DelayEntry, Tag("delay")],
    Discriminator(
        _entry_kind,
        custom_error_type="invalid_turn",
        custom_error_message="a turn is an object with exactly one of the keys "
        "'reply', 'tool_calls', 'fail', 'delay'",
    ),
]
_DelayEntry.model_rebuild()
_SCRIPT_ADAPTER: TypeAdapter[list[_Entry]] = TypeAdapter(list[_Entry])


def _to_turn(entry: _ReplyEntry | _CallToolsEntry | _FailEntry | _DelayEntry) -> Turn:
    if isinstance(entry, _ReplyEntry):
        return Reply(entry.reply)
    if isinstance(entry, _CallToolsEntry):
        calls = [ToolCall(call.name, call.arguments, call.id) for call in entry.tool_calls]
        return CallTools(calls, content=entry.content)
    if isinstance(entry, _FailEntry):
        return Fail(entry.fail, entry.message, entry.times, entry.retry_after)
    return Delay(entry.delay, _to_turn(entry.then))


def _location(loc: tuple[int | str, ...]) -> str:
    """A readable path such as ``2/tool_calls/0/name``, without the tags pydantic repeats."""
    parts: list[str] = []
    for part in loc:
        if not parts or parts[-1] != str(part):
            parts.append(str(part))
    return "/".join(parts) or "<root>"


def parse_script(text: str | bytes, *, source: str = "script") -> list[Turn]:
    """Parse a JSON script (a list of turn objects) into turns.

    Args:
        text: The JSON text, e.g. ``[{"reply": "hi"}, {"fail": 503}]``.
        source: What to call the script in error messages (usually its path).

    Returns:
        The turns in order.

    Raises:
        ScriptError: The text is not JSON, not a list, or a turn is malformed.
    """
    try:
        entries = _SCRIPT_ADAPTER.validate_json(text)
    except ValidationError as error:
        problems = "; ".join(
            f"at {_location(problem['loc'])}: {problem['msg']}"
            for problem in error.errors(include_url=False)
        )
        raise ScriptError(
            f"{source} is not a valid scripted-model script: {problems}.",
            hint='Expected a JSON list such as [{"reply": "hi"}, '
            '{"tool_calls": [{"name": "f", "arguments": {}}]}, {"fail": 503}].',
        ) from None
    return [_to_turn(entry) for entry in entries]


def load_script(path: Path) -> list[Turn]:
    """Read and parse a JSON script file.

    Args:
        path: The file holding a JSON list of turns.

    Returns:
        The turns in order.

    Raises:
        ScriptError: The file cannot be read or is not a valid script.
    """
    try:
        text = path.read_bytes()
    except OSError as error:
        raise ScriptError(f"Cannot read the script {path}: {error.strerror or error}.") from None
    return parse_script(text, source=str(path))
