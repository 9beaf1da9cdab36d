"""The Anthropic Messages wire format the scripted model also speaks (``POST /v1/messages``).

Pure functions from the same resolved answer the chat-completions format uses
(:class:`~supervisor.testing.protocol.ScriptedAnswer`) to a ``message`` object, to the
server-sent events of a streamed one (``message_start``, ``content_block_start`` /
``content_block_delta`` (``text_delta``, ``input_json_delta``) / ``content_block_stop``,
``message_delta``, ``message_stop``), and to Anthropic-style error bodies. One script drives
both wire formats, so a test can point the Claude Code CLI (``ANTHROPIC_BASE_URL``) and an
OpenAI client at the same scripted turns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from supervisor.testing.protocol import (
    ResolvedCall,
    ScriptedAnswer,
    estimate_tokens,
    fragments,
)

__all__ = [
    "count_tokens_body",
    "message_body",
    "message_error_body",
    "message_events",
]

StopReason = Literal["end_turn", "tool_use"]

_ERROR_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _message_id(answer: ScriptedAnswer) -> str:
    return "msg_scripted_" + answer.completion_id.rsplit("-", 1)[-1]


def _stop_reason(answer: ScriptedAnswer) -> StopReason:
    return "tool_use" if answer.calls else "end_turn"


def _tool_input(call: ResolvedCall) -> Any:
    """The call's arguments as the ``input`` object (malformed JSON text becomes ``{}``)."""
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _usage(answer: ScriptedAnswer) -> dict[str, int]:
    counts = answer.usage()
    return {
        "input_tokens": counts["prompt_tokens"],
        "output_tokens": counts["completion_tokens"],
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def message_body(answer: ScriptedAnswer) -> dict[str, Any]:
    """The non-streamed ``message`` object for an answer.

    Args:
        answer: The resolved answer.

    Returns:
        The JSON-ready body: text and ``tool_use`` content blocks, the stop reason and
        deterministic usage.
    """
    content: list[dict[str, Any]] = []
    if answer.content:
        content.append({"type": "text", "text": answer.content})
    for call in answer.calls:
        content.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call)}
        )
    return {
        "id": _message_id(answer),
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": content,
        "stop_reason": _stop_reason(answer),
        "stop_sequence": None,
        "usage": _usage(answer),
    }


def _block_events(
    index: int, block: dict[str, Any], deltas: Iterable[dict[str, Any]]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """One content block as the stream sends it: start, its deltas, stop."""
    yield "content_block_start", {"type": "content_block_start", "index": index,
                                  "content_block": block}  # fmt: skip
    for delta in deltas:
        yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                      "delta": delta}  # fmt: skip
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def message_events(answer: ScriptedAnswer) -> Iterator[tuple[str, dict[str, Any]]]:
    """The server-sent events of a streamed answer, in order, as (event name, data).

    Text arrives as ``text_delta`` fragments, each tool call's input as ``input_json_delta``
    fragments of its JSON text (clients must reassemble both), then ``message_delta`` with
    the stop reason and output tokens, then ``message_stop``.

    Args:
        answer: The resolved answer.

    Yields:
        (event type, JSON-ready data); the caller frames them as server-sent events.
    """
    usage = _usage(answer)
    start = message_body(answer) | {"content": [], "stop_reason": None}
    start["usage"] = usage | {"output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    index = 0
    if answer.content:
        text = ({"type": "text_delta", "text": part} for part in fragments(answer.content))
        yield from _block_events(index, {"type": "text", "text": ""}, text)
        index += 1
    for call in answer.calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        json_parts = (
            {"type": "input_json_delta", "partial_json": part} for part in fragments(call.arguments)
        )
        yield from _block_events(index, block, json_parts)
        index += 1
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(answer), "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def message_error_body(status: int, message: str) -> dict[str, Any]:
    """An Anthropic-style error body, ``{"type": "error", "error": {"type", "message"}}``.

    Args:
        status: The HTTP status the body is sent with (selects the error type).
        message: What went wrong.

    Returns:
        The JSON-ready body.
    """
    error_type = _ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": error_type, "message": message}}


def count_tokens_body(request_body: Mapping[str, Any]) -> dict[str, int]:
    """The answer to ``POST /v1/messages/count_tokens``: a deterministic estimate."""
    prompt = {
        "system": request_body.get("system"),
        "messages": request_body.get("messages"),
        "tools": request_body.get("tools"),
    }
    text = json.dumps(prompt, ensure_ascii=False, separators=(",", ":"))
    return {"input_tokens": estimate_tokens(text)}
