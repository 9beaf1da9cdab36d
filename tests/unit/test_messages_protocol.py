"""The scripted model's Anthropic Messages format: bodies and the streamed event sequence."""

from __future__ import annotations

import json

from supervisor.testing.messages_protocol import (
    count_tokens_body,
    message_body,
    message_error_body,
    message_events,
)
from supervisor.testing.protocol import ResolvedCall, ScriptedAnswer


def _answer(content: str | None, *calls: ResolvedCall) -> ScriptedAnswer:
    return ScriptedAnswer("chatcmpl-scripted-7", 0, "m", content, list(calls), 10)


def test_a_tool_call_is_a_tool_use_block() -> None:
    call = ResolvedCall("call_1", "Bash", '{"command": "ls"}')
    body = message_body(_answer("Let me look.", call))
    assert body["id"] == "msg_scripted_7" and body["type"] == "message"
    assert body["stop_reason"] == "tool_use"
    assert body["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "call_1", "name": "Bash", "input": {"command": "ls"}},
    ]
    assert message_body(_answer("hi"))["stop_reason"] == "end_turn"


def test_streamed_events_reassemble_into_the_message() -> None:
    call = ResolvedCall("call_1", "Bash", '{"command": "touch a long file name"}')
    events = list(message_events(_answer("Some text to split", call)))
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert all(data["type"] == name for name, data in events)
    text = "".join(
        d["delta"]["text"] for _, d in events if d.get("delta", {}).get("type") == "text_delta"
    )
    partial = [
        d["delta"]["partial_json"]
        for _, d in events
        if d.get("delta", {}).get("type") == "input_json_delta"
    ]
    assert text == "Some text to split"
    assert len(partial) > 1 and json.loads("".join(partial)) == {
        "command": "touch a long file name"
    }
    starts = [d for name, d in events if name == "content_block_start"]
    assert [s["index"] for s in starts] == [0, 1]
    assert starts[1]["content_block"]["type"] == "tool_use"
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_errors_and_token_counts() -> None:
    assert message_error_body(429, "slow down") == {
        "type": "error", "error": {"type": "rate_limit_error", "message": "slow down"},
    }  # fmt: skip
    assert message_error_body(500, "x")["error"]["type"] == "api_error"
    assert count_tokens_body({"messages": [{"role": "user", "content": "hi"}]})["input_tokens"] > 0
