"""What the scripted model answers: the turn types and the strict JSON script format.

A turn is one scripted answer to one chat-completion request. Each turn type is one validated,
frozen pydantic dataclass, so ``Reply("hi")`` written in a test and ``{"reply": "hi"}`` read
from a JSON script pass the same strict field rules and give equal values. A field whose JSON
key differs from its Python name carries that key as its validation alias (``Fail.status`` is
``"fail"``); a script is read by alias only, Python code builds turns by field name or position.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass, rebuild_dataclass

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


_STRICT = ConfigDict(strict=True, extra="forbid", validate_by_name=True, validate_by_alias=False)
_SCRIPT_HINT = (
    'Expected a JSON list such as [{"reply": "hi"}, '
    '{"tool_calls": [{"name": "f", "arguments": {}}]}, {"fail": 503}].'
)


@dataclass(frozen=True, config=_STRICT)
class Reply:
    """An assistant text message, answered with ``finish_reason="stop"``.

    Args:
        content: The assistant's text (JSON key ``reply``).
    """

    content: Annotated[str, Field(validation_alias="reply")]


@dataclass(frozen=True, config=_STRICT)
class ToolCall:
    """One function call inside a `CallTools` turn.

    Args:
        name: The function name the model "chooses"; not empty.
        arguments: A dict is sent as JSON text; a str is sent verbatim, so a test can send
            malformed JSON on purpose.
        id: The tool-call id; when None the server assigns ``call_<n>`` from a per-server
            counter, so ids are unique within a run and identical across runs.
    """

    name: Annotated[str, Field(min_length=1)]
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None

    def arguments_text(self) -> str:
        """The arguments exactly as they go on the wire (JSON text)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, config=_STRICT)
class CallTools:
    """An assistant message with ``tool_calls`` (several calls = parallel tool calls).

    Args:
        calls: The calls, in order; at least one (JSON key ``tool_calls``).
        content: Optional assistant text sent alongside the calls (usually None).
    """

    calls: Annotated[list[ToolCall], Field(validation_alias="tool_calls", min_length=1)]
    content: str | None = None


@dataclass(frozen=True, config=_STRICT)
class Fail:
    """Answer with an HTTP error status and an OpenAI-style error body.

    Args:
        status: An HTTP error status (400-599), e.g. 429, 500 or 503 to exercise retries
            (JSON key ``fail``).
        message: The error message; defaults to one naming the status.
        times: In a list script, how many consecutive requests get this failure before the
            script moves on (at least 1). A callable script decides per request, so it is
            ignored there.
        retry_after: When set (>= 0), sent as ``retry-after-ms`` so clients wait that many
            seconds before retrying (keeps retry tests fast and deterministic).
    """

    status: Annotated[int, Field(validation_alias="fail", ge=400, le=599)]
    message: str = ""
    times: Annotated[int, Field(ge=1)] = 1
    retry_after: Annotated[float, Field(ge=0)] | None = None

    def error_message(self) -> str:
        """The message sent in the error body (the given one or a default naming the status)."""
        if self.message:
            return self.message
        try:
            phrase = HTTPStatus(self.status).phrase
        except ValueError:
            phrase = "Error"
        return f"scripted failure: {self.status} {phrase}"


@dataclass(frozen=True, config=_STRICT)
class Delay:
    """Wait, then answer with another turn (for client timeout and cancellation tests).

    Args:
        seconds: How long to wait before answering (>= 0; JSON key ``delay``); stopping the
            server cuts the wait short.
        then: The turn answered after the wait.
    """

    seconds: Annotated[float, Field(validation_alias="delay", ge=0)]
    then: _TaggedTurn


Turn = Reply | CallTools | Fail | Delay
"""One scripted answer to one chat-completion request."""

_TURN_KEYS: Mapping[type[Any], str] = {
    Reply: "reply",
    CallTools: "tool_calls",
    Fail: "fail",
    Delay: "delay",
}


def _turn_kind(value: Any) -> str | None:
    """The tag of a turn: its type, or the one turn key a JSON object carries (else None)."""
    if not isinstance(value, dict):
        return _TURN_KEYS.get(type(value))
    present = [key for key in _TURN_KEYS.values() if key in value]
    return present[0] if len(present) == 1 else None


_TaggedTurn = Annotated[
    Annotated[Reply, Tag("reply")]
    | Annotated[CallTools, Tag("tool_calls")]
    | Annotated[Fail, Tag("fail")]
    | Annotated[Delay, Tag("delay")],
    Discriminator(
        _turn_kind,
        custom_error_type="invalid_turn",
        custom_error_message="a turn is Reply, CallTools, Fail or Delay; in JSON, an object "
        "with exactly one of the keys 'reply', 'tool_calls', 'fail', 'delay'",
    ),
]
# Delay.then names the union above, so Delay is completed once the union exists.
# (The ignore: mypy does not see pydantic's dataclass protocol on a decorated class.)
rebuild_dataclass(Delay)  # type: ignore[arg-type]
_SCRIPT_ADAPTER: TypeAdapter[list[Turn]] = TypeAdapter(list[_TaggedTurn])

# A script is a JSON document: say "key", not pydantic's keyword-argument wording for dataclasses.
_JSON_MESSAGES = {
    "unexpected_keyword_argument": "Extra inputs are not permitted",
    "missing_argument": "Field required",
}


def _location(loc: tuple[int | str, ...]) -> str:
    """A readable path such as ``2/tool_calls/0/name``, without the tags pydantic repeats."""
    parts: list[str] = []
    for part in loc:
        if not parts or parts[-1] != str(part):
            parts.append(str(part))
    return "/".join(parts) or "<root>"


def _problems(error: ValidationError, field_names: tuple[str, ...] | None = None) -> str:
    """Each problem as ``at LOCATION: MESSAGE``.

    With ``field_names`` the error came from a Python constructor and positional arguments are
    named by their field; without, it came from a JSON script and messages speak of keys.
    """
    problems = []
    for problem in error.errors(include_url=False):
        loc, message = problem["loc"], problem["msg"]
        if field_names is None:
            message = _JSON_MESSAGES.get(problem["type"], message)
        elif loc and isinstance(loc[0], int) and loc[0] < len(field_names):
            loc = (field_names[loc[0]], *loc[1:])
        problems.append(f"at {_location(loc)}: {message}")
    return "; ".join(problems)


def _raise_script_errors(turn_type: type[Any]) -> None:
    """Make building ``turn_type`` from Python raise `ScriptError`, as reading a script does."""
    validating_init: Callable[..., None] = turn_type.__init__
    field_names = tuple(field.name for field in dataclasses.fields(turn_type))

    @functools.wraps(validating_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            validating_init(self, *args, **kwargs)
        except ValidationError as error:
            raise ScriptError(
                f"{turn_type.__name__} is not a valid turn: {_problems(error, field_names)}."
            ) from None

    turn_type.__init__ = __init__


# Only after the rebuild above, which installs a fresh validating __init__.
for _turn_type in (Reply, ToolCall, CallTools, Fail, Delay):
    _raise_script_errors(_turn_type)


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
        return _SCRIPT_ADAPTER.validate_json(text, by_alias=True, by_name=False)
    except ValidationError as error:
        raise ScriptError(
            f"{source} is not a valid scripted-model script: {_problems(error)}.",
            hint=_SCRIPT_HINT,
        ) from None


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
