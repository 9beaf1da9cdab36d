"""The scripted model's Anthropic Messages API over real HTTP on loopback (raw ``urllib``).

The Claude Code CLI drives it end to end in test_claude_code_hook.py; these pin the wire format
a client without Claude Code sees: streamed and plain answers, ``x-api-key``, ``count_tokens``
(which takes no turn), and errors in Anthropic's shape.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from supervisor.testing import CallTools, Fail, Reply, ScriptedModel, ToolCall, Turn

HELLO: dict[str, Any] = {
    "model": "claude-test", "max_tokens": 100,
    "messages": [{"role": "user", "content": "hello"}],
}  # fmt: skip


def _post(
    model: ScriptedModel, path: str, body: dict[str, Any], key: str = "sk-ant-scripted"
) -> tuple[int, str, str]:
    request = urllib.request.Request(
        model.anthropic_base_url + path, data=json.dumps(body).encode(), method="POST",
        headers={"content-type": "application/json", "x-api-key": key,
                 "anthropic-version": "2023-06-01"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["content-type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read().decode()


def _events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Server-sent events as (event name, data)."""
    events = []
    for chunk in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def test_plain_and_streamed_answers_play_one_script() -> None:
    script: list[Turn] = [
        CallTools([ToolCall("Bash", {"command": "ls -la"}, id="toolu_1")]),
        Reply("All done."),
    ]
    with ScriptedModel(script) as model:
        status, kind, text = _post(model, "/v1/messages", HELLO | {"stream": True})
        assert status == 200 and kind.startswith("text/event-stream")
        events = _events(text)
        assert events[0][0] == "message_start"
        partial = "".join(
            data["delta"]["partial_json"] for name, data in events if name == "content_block_delta"
        )
        assert json.loads(partial) == {"command": "ls -la"}
        assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
        status, _, text = _post(model, "/v1/messages?beta=true", HELLO)
        body = json.loads(text)
        assert status == 200
        assert body["content"] == [{"type": "text", "text": "All done."}]
        assert body["stop_reason"] == "end_turn"
        assert [request.path for request in model.requests] == ["/v1/messages"] * 2
        assert model.requests[0].headers["x-api-key"] == "sk-ant-scripted"


def test_count_tokens_takes_no_turn() -> None:
    with ScriptedModel([Reply("hi")]) as model:
        status, _, text = _post(model, "/v1/messages/count_tokens", HELLO)
        assert status == 200 and json.loads(text)["input_tokens"] > 0
        assert model.turns_left == 1 and not model.requests


@pytest.mark.parametrize(
    ("key", "body", "status", "error_type"),
    [
        ("wrong", HELLO, 401, "authentication_error"),
        ("secret", {"model": "m"}, 400, "invalid_request_error"),
    ],
)
def test_errors_have_the_anthropic_shape(
    key: str, body: dict[str, Any], status: int, error_type: str
) -> None:
    with ScriptedModel([Reply("hi")], api_key="secret") as model:
        got, _, text = _post(model, "/v1/messages", body, key=key)
    assert got == status
    body_out = json.loads(text)
    assert set(body_out) == {"type", "error"} and body_out["type"] == "error"
    assert body_out["error"]["type"] == error_type and body_out["error"]["message"]


def test_a_scripted_failure_and_an_exhausted_script() -> None:
    with ScriptedModel([Fail(529, "busy")]) as model:
        status, _, text = _post(model, "/v1/messages", HELLO)
        assert status == 529 and json.loads(text)["error"]["type"] == "overloaded_error"
        status, _, text = _post(model, "/v1/messages", HELLO)
        assert status == 500 and "no turn left" in json.loads(text)["error"]["message"]
