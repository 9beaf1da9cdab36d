"""The OpenAI chat-completions wire format the scripted model speaks.

What a request looked like (`RecordedRequest`) and pure functions from a resolved answer to
JSON bodies: a ``chat.completion`` object, the ``chat.completion.chunk`` sequence of a streamed
answer, and OpenAI-style error bodies. Keeping them free of server state makes the exact shapes
easy to read and to test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

__all__ = [
    "RecordedRequest",
    "Refusal",
    "ResolvedCall",
    "ScriptedAnswer",
    "completion_body",
    "completion_chunks",
    "error_body",
    "estimate_tokens",
    "fragments",
    "prompt_tokens",
]

FinishReason = Literal["stop", "tool_calls"]

# Streamed text and tool arguments are cut into fragments of at most this many characters (and
# into at least two fragments when there are two characters or more), so clients must reassemble.
_FRAGMENT_CHARS = 12

_ERROR_KINDS: Mapping[int, tuple[str, str]] = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("invalid_request_error", "not_found"),
    408: ("timeout_error", "request_timeout"),
    409: ("conflict_error", "conflict"),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", "unprocessable_entity"),
    429: ("requests", "rate_limit_exceeded"),
}


@dataclass(frozen=True)
class RecordedRequest:
    """One chat-completion request the scripted model received.

    Attributes:
        number: 1-based position among the recorded requests.
        method: The HTTP method (``POST``).
        path: The request path, e.g. ``/v1/chat/completions``.
        headers: Header names in lower case; credentials are redacted (``Bearer ***``).
        body: The parsed JSON request body.
    """

    number: int
    method: str
    path: str
    headers: Mapping[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` the client sent."""
        return cast("list[dict[str, Any]]", self.body.get("messages") or [])

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The ``tools`` the client sent, or ``[]``."""
        return cast("list[dict[str, Any]]", self.body.get("tools") or [])

    @property
    def tool_names(self) -> list[str]:
        """The function names among `tools`, in the order sent."""
        names: list[str] = []
        for tool in self.tools:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                names.append(function["name"])
        return names

    @property
    def model(self) -> str | None:
        """The ``model`` the client asked for."""
        requested = self.body.get("model")
        return requested if isinstance(requested, str) else None

    @property
    def stream(self) -> bool:
        """Whether the client asked for a streamed answer."""
        return self.body.get("stream") is True


@dataclass(frozen=True)
class Refusal:
    """A request the script cannot answer (it ran out, or the callable failed); sent as 500."""

    message: str


@dataclass(frozen=True)
class ResolvedCall:
    """A tool call with its final id and its arguments as wire text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ScriptedAnswer:
    """One successful assistant answer, ready to be written as JSON or as chunks."""

    completion_id: str
    created: int
    model: str
    content: str | None
    calls: Sequence[ResolvedCall]
    prompt_tokens: int

    @property
    def finish_reason(self) -> FinishReason:
        """``tool_calls`` when the answer calls tools, else ``stop``."""
        return "tool_calls" if self.calls else "stop"

    def usage(self) -> dict[str, int]:
        """Deterministic token counts (about four characters per token)."""
        completion_text = (self.content or "") + "".join(c.name + c.arguments for c in self.calls)
        completion_tokens = estimate_tokens(completion_text)
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
        }


def estimate_tokens(text: str) -> int:
    """A deterministic token estimate: characters / 4, rounded up.

    Args:
        text: Any text.

    Returns:
        The estimate (0 for empty text).
    """
    return (len(text) + 3) // 4


def prompt_tokens(request_body: Mapping[str, Any]) -> int:
    """Estimate prompt tokens from the request's messages and tools (as compact JSON).

    Args:
        request_body: The parsed chat-completions request.

    Returns:
        The estimate.
    """
    prompt = {"messages": request_body.get("messages"), "tools": request_body.get("tools")}
    return estimate_tokens(json.dumps(prompt, ensure_ascii=False, separators=(",", ":")))


def error_body(status: int, message: str) -> dict[str, Any]:
    """An OpenAI-style error body, ``{"error": {"message", "type", "param", "code"}}``.

    Args:
        status: The HTTP status the body is sent with (selects ``type`` and ``code``).
        message: What went wrong, for the client's exception message.

    Returns:
        The JSON-ready body.
    """
    error_type, code = _ERROR_KINDS.get(status, ("server_error", "server_error"))
    if status == 503:
        code = "service_unavailable"
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def _tool_call_json(call: ResolvedCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def completion_body(answer: ScriptedAnswer) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` object for an answer.

    Args:
        answer: The resolved answer.

    Returns:
        The JSON-ready body, with one choice and deterministic usage.
    """
    message: dict[str, Any] = {"role": "assistant", "content": answer.content, "refusal": None}
    if answer.calls:
        message["tool_calls"] = [_tool_call_json(call) for call in answer.calls]
    return {
        "id": answer.completion_id,
        "object": "chat.completion",
        "created": answer.created,
        "model": answer.model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": answer.finish_reason,
            }
        ],
        "usage": answer.usage(),
    }


def fragments(text: str) -> list[str]:
    """Cut text into at least two pieces (when it has two characters or more)."""
    if len(text) < 2:
        return [text] if text else []
    size = max(1, min(_FRAGMENT_CHARS, (len(text) + 1) // 2))
    return [text[start : start + size] for start in range(0, len(text), size)]


def completion_chunks(answer: ScriptedAnswer, *, include_usage: bool) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed answer, in order.

    The first chunk carries the role; text arrives as content fragments; each tool call opens
    with a delta holding its index, id, type and name, followed by argument fragments; a final
    chunk carries the finish reason; with ``include_usage`` a last chunk with no choices carries
    the usage (and earlier chunks say ``"usage": null``), as OpenAI does.

    Args:
        answer: The resolved answer.
        include_usage: Whether the request asked for ``stream_options.include_usage``.

    Yields:
        JSON-ready chunk objects (the caller frames them as server-sent events).
    """

    def chunk(delta: dict[str, Any], finish_reason: FinishReason | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": answer.completion_id,
            "object": "chat.completion.chunk",
            "created": answer.created,
            "model": answer.model,
            "system_fingerprint": None,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if include_usage:
            body["usage"] = None
        return body

    opening_content = "" if answer.content is not None or not answer.calls else None
    yield chunk({"role": "assistant", "content": opening_content, "refusal": None})
    for fragment in fragments(answer.content or ""):
        yield chunk({"content": fragment})
    for index, call in enumerate(answer.calls):
        opening = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield chunk({"tool_calls": [opening]})
        for fragment in fragments(call.arguments):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
    yield chunk({}, answer.finish_reason)
    if include_usage:
        yield {
            "id": answer.completion_id,
            "object": "chat.completion.chunk",
            "created": answer.created,
            "model": answer.model,
            "system_fingerprint": None,
            "choices": [],
            "usage": answer.usage(),
        }
