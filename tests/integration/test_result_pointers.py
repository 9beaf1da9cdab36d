"""An offloaded result's pointer works only for the agent thread (and user) it was issued to.

Real agents on one real ledger (SQLite and PostgreSQL), driven by the scripted model: agent A
offloads a large HR result; agent B, with A's digest (digests appear in traces, the TUI and
exports), asks for it and is refused exactly as for a digest that does not exist.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from supervisor import MemAgentBuilder, ToolResultPolicy, governed_tool
from supervisor.canonical import sha256_hex
from supervisor.runtime.agent import MemAgent
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall, Turn, llm_config

SALARY = "salary-row-0042"
UNKNOWN = "sha256:" + "ab" * 32


@governed_tool
def export_hr_rows() -> dict[str, Any]:
    """Every HR row (large)."""
    return {"rows": [{"id": i, "note": f"{SALARY} {i} " + "x" * 40} for i in range(400)]}


@pytest.fixture
def provider(ledger_url: str) -> Iterator[SQLModelProvider]:
    with SQLModelProvider(ledger_url) as opened:
        yield opened


def _agent(provider: SQLModelProvider, model: ScriptedModel, agent_id: str) -> MemAgent:
    return (
        MemAgentBuilder()
        .with_agent_id(agent_id)
        .with_llm_config(llm_config(model))
        .with_tools([export_hr_rows])
        .with_tool_result_policy(ToolResultPolicy(offload_above_chars=2_000))
        .with_memory_provider(provider)
        .build()
    )


def _tool_answers(model: ScriptedModel) -> list[Any]:
    """The tool messages answering the model's last tool calls, parsed, in order."""
    messages = model.requests[-1].messages
    last_call = max(i for i, message in enumerate(messages) if message.get("tool_calls"))
    return [json.loads(message["content"]) for message in messages[last_call + 1 :]]


def _issue_pointer(provider: SQLModelProvider, thread_id: str, user_id: str | None) -> str:
    """Agent A runs export_hr_rows on ``thread_id``; returns the pointer's digest."""
    script: list[Turn] = [CallTools([ToolCall("export_hr_rows", {})]), Reply("Stored.")]
    with ScriptedModel(script) as model:
        assert (
            _agent(provider, model, "hr-agent")
            .run("Export", thread_id=thread_id, user_id=user_id)
            .status
            == "completed"
        )
    (pointer,) = _tool_answers(model)
    digest: str = pointer["offloaded_result"]["digest"]
    return digest


def _reads(
    provider: SQLModelProvider, agent_id: str, digests: list[str], thread_id: str,
    user_id: str | None = None,
) -> list[Any]:  # fmt: skip
    """What ``agent_id`` receives when its model expands then searches each digest."""
    calls = []
    for digest in digests:
        calls.append(ToolCall("expand_result", {"digest": digest, "offset": 0, "limit": 2_000}))
        calls.append(ToolCall("search_result", {"digest": digest, "query": SALARY}))
    with ScriptedModel([CallTools(calls), Reply("Done.")]) as model:
        agent = _agent(provider, model, agent_id)
        assert agent.run("Read it", thread_id=thread_id, user_id=user_id).status == "completed"
    return _tool_answers(model)


def _without_digest(answer: Any, digest: str) -> Any:
    return json.loads(json.dumps(answer).replace(digest, "sha256:<digest>"))


def test_another_agent_cannot_read_a_pointer_and_is_told_it_does_not_exist(
    provider: SQLModelProvider,
) -> None:
    digest = _issue_pointer(provider, "thread-a", "ann")

    answers = _reads(provider, "other-agent", [digest, UNKNOWN], "thread-a", "ann")

    stolen_expand, stolen_search, unknown_expand, unknown_search = answers
    assert SALARY not in json.dumps(answers)
    assert stolen_expand["error"]["code"] == "unknown_blob"
    assert _without_digest(stolen_expand, digest) == _without_digest(unknown_expand, UNKNOWN)
    assert _without_digest(stolen_search, digest) == _without_digest(unknown_search, UNKNOWN)


def test_the_issuing_thread_reads_it_and_nobody_else_does(provider: SQLModelProvider) -> None:
    digest = _issue_pointer(provider, "thread-a", "ann")

    expand, search = _reads(provider, "hr-agent", [digest], "thread-a", "ann")
    assert SALARY in expand["text"] and search["matches"]
    for thread_id, user_id in (("thread-b", "ann"), ("thread-a", "bob"), ("thread-a", None)):
        refused = _reads(provider, "hr-agent", [digest], thread_id, user_id)
        assert [answer["error"]["code"] for answer in refused] == ["unknown_blob"] * 2


def test_blobs_that_are_not_offloaded_results_are_refused(provider: SQLModelProvider) -> None:
    # What a sandbox run stores for its output (sandboxes.base), and a result stored by resume.
    sandbox_output = provider.ledger.put_blob(f"{SALARY} from the sandbox\n".encode(), "text/plain")
    stored = provider.ledger.put_blob(json.dumps({"note": SALARY}).encode(), "application/json")
    digests = [f"sha256:{sandbox_output.sha256}", f"sha256:{stored.sha256}"]
    assert sandbox_output.sha256 == sha256_hex(f"{SALARY} from the sandbox\n".encode())

    answers = _reads(provider, "hr-agent", digests, "thread-a", "ann")

    assert [answer["error"]["code"] for answer in answers] == ["unknown_blob"] * 4
    assert SALARY not in json.dumps(answers)
