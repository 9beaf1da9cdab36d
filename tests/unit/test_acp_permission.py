"""ACP permission requests as ledger calls: which option each decision answers, what the
proposal is made of, and the relay passing every other line on byte for byte."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from supervisor.acp.gate import AcpGate
from supervisor.acp.permission import Cancelled, Selected, ToolCalls, read_ask, response_json
from supervisor.acp.relay import Relay
from supervisor.cli.acp import agent_name
from supervisor.store.provider import SQLModelProvider


def _params(*options: tuple[str, str], **tool_call: Any) -> dict[str, Any]:
    return {
        "sessionId": "s1",
        "toolCall": {"toolCallId": "c1", **tool_call},
        "options": [{"optionId": oid, "name": oid.title(), "kind": kind} for oid, kind in options],
    }


def test_approval_prefers_allow_once_and_never_invents_an_option() -> None:
    both = read_ask(
        _params(("always", "allow_always"), ("once", "allow_once"), ("no", "reject_once"))
    )
    assert both.approved() == Selected("once")
    assert both.refused() == Selected("no")
    only_always = read_ask(_params(("always", "allow_always"), ("never", "reject_always")))
    assert only_always.approved() == Selected("always")  # documented fallback
    assert only_always.refused() == Cancelled()  # never answers reject_always on its own
    nothing = read_ask(_params())
    assert nothing.approved() == Cancelled() and nothing.refused() == Cancelled()


def test_responses_are_acp_outcomes() -> None:
    assert response_json(Selected("yes-once")) == {
        "outcome": {"outcome": "selected", "optionId": "yes-once"}
    }
    assert response_json(Cancelled()) == {"outcome": {"outcome": "cancelled"}}


def test_the_call_is_kind_title_input_content_and_locations() -> None:
    calls = ToolCalls()
    calls.update("s1", {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Run ls",
                        "kind": "execute", "rawInput": {"command": "ls"}})  # fmt: skip
    assert calls.update("s1", {"sessionUpdate": "agent_message_chunk"}) is None
    ask = read_ask(_params(("y", "allow_once")), calls.known("s1", "c1"))
    assert ask.tool_name == "execute"
    assert ask.arguments == {"title": "Run ls", "rawInput": {"command": "ls"}}
    titled = read_ask(_params(("y", "allow_once"), title="Fetch a page"))
    assert titled.tool_name == "Fetch a page"
    assert read_ask(_params(("y", "allow_once"))).tool_name == "other"


def test_malformed_requests_are_refused() -> None:
    with pytest.raises(ValueError):
        read_ask({"sessionId": "s1", "options": []})
    with pytest.raises(ValueError):
        read_ask(_params(("y", "maybe")))


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["python", "tests/support/acp_agent.py"], "acp_agent"),
        (["/usr/bin/python3.11", "-u", "agent.py", "--fast"], "agent"),
        (["npx", "-y", "@zed-industries/claude-code-acp"], "claude-code-acp"),
        (["gemini", "--experimental-acp"], "gemini"),
        (["uvx", "fast-agent-acp@1.2"], "fast-agent-acp"),
    ],
)
def test_agent_names_come_from_the_command(argv: list[str], name: str) -> None:
    assert agent_name(argv) == name


def test_relay_passes_other_lines_unchanged_and_answers_bad_requests_itself(
    provider: SQLModelProvider,
) -> None:
    to_editor: list[bytes] = []
    to_agent: list[bytes] = []

    async def editor_sink(line: bytes) -> None:
        to_editor.append(line)

    async def agent_sink(line: bytes) -> None:
        to_agent.append(line)

    relay = Relay(AcpGate(provider.ledger, "a"), editor_sink, agent_sink)
    odd = b'{ "method":"session/prompt" ,"id":7,"params":{"sessionId":"s1","prompt":[]}}\n'
    update = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1",  "update":{}}}\n'
    )
    not_json = b"not json at all\n"
    bad = _params(("y", "allow_once"))
    del bad["toolCall"]
    permission = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/request_permission",
                             "params": bad}).encode() + b"\n"  # fmt: skip

    async def scenario() -> None:
        await relay.from_editor(odd)
        await relay.from_agent(update)
        await relay.from_agent(not_json)
        await relay.from_agent(permission)
        await asyncio.gather(*relay.tasks)

    asyncio.run(scenario())
    assert to_editor == [update, not_json]  # the permission request never reaches the editor
    assert to_agent[0] == odd
    (answer,) = [json.loads(line) for line in to_agent[1:]]
    assert answer["id"] == 3 and answer["error"]["code"] == -32602
    assert relay.state.turn["s1"].startswith("acp-turn-")
    assert provider.ledger.list().items == ()  # nothing proposed for a malformed request
