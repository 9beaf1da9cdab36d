"""``supervisor mcp-gateway`` on 2026-07-28: a long wait answered with ``input_required``.

Real processes: ``mcp.Client`` (with an elicitation callback, so it can be asked) launches
``supervisor mcp-gateway -- python tests/support/mcp_notes_server.py``; decisions come from
``supervisor proposals approve|reject`` in other processes.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any, Literal

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    InputResponses,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from support.cli import SUPERVISOR, run_cli
from support.mcp_gateway import NOTES_SERVER, OWNER
from support.mcp_gateway import notes as _notes

from supervisor import SQLModelProvider
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.mcp.gateway_input import WAIT_INPUT_KEY

ACCEPT: InputResponses = {WAIT_INPUT_KEY: ElicitResult(action="accept")}
pytestmark = pytest.mark.slow


def _proposals(url: str) -> list[Proposal]:
    with SQLModelProvider(url) as provider:
        return list(provider.ledger.list(owner=OWNER, limit=50).items)


@pytest.fixture
def env(sqlite_url: str, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SUPERVISOR_DB": sqlite_url, "NOTES_FILE": str(tmp_path / "notes.jsonl")}


def _params(environment: dict[str, str], *extra: str) -> StdioServerParameters:
    assert SUPERVISOR is not None
    return StdioServerParameters(
        command=SUPERVISOR, env=environment,
        args=["mcp-gateway", "--name", "notes", "--trust", "trusted", "--progress-every", "0.5",
              "--block-seconds", "1", *extra, "--", sys.executable, NOTES_SERVER],
    )  # fmt: skip


def _state(result: Any) -> str:
    assert isinstance(result, InputRequiredResult), result
    assert result.request_state is not None
    return result.request_state


def _form(result: Any) -> ElicitRequestFormParams:
    assert isinstance(result, InputRequiredResult), result
    assert result.request_state and result.input_requests is not None
    request = result.input_requests[WAIT_INPUT_KEY]
    assert isinstance(request, ElicitRequest)
    assert isinstance(request.params, ElicitRequestFormParams)
    return request.params


async def _refuse_to_be_asked(context: Any, params: Any) -> ElicitResult:
    raise AssertionError("the test drives the rounds itself")


def test_a_waiting_call_is_answered_input_required_and_runs_once_after_approval(
    env: dict[str, str], sqlite_url: str
) -> None:
    notes = Path(env["NOTES_FILE"])
    arguments = {"text": "later"}

    async def body() -> dict[str, Any]:
        async with Client(_params(env, "--replay-window", "0",
                                  "--decision-base-url", "https://sup.example/"),
                          elicitation_callback=_refuse_to_be_asked) as client:  # fmt: skip
            session = client.session
            assert session.protocol_version in MODERN_PROTOCOL_VERSIONS
            started = time.monotonic()
            first = await session.call_tool("append_note", arguments, allow_input_required=True)
            form = _form(first)
            assert time.monotonic() - started < 30  # answered, not held open
            (proposal,) = _proposals(sqlite_url)
            assert proposal.status is ProposalStatus.PENDING and _notes(notes) == []
            assert first.meta is not None
            assert first.meta["supervisor/proposal_id"] == proposal.proposal_id
            with SQLModelProvider(sqlite_url) as provider:  # its waiter between the rounds
                assert provider.ledger.waiter_alive(proposal.proposal_id) is True
                (row,) = [p for p in provider.ledger.list_processes() if p.kind == "mcp-gateway"]
                assert row.status == "waiting_for_approval"
            state = _state(first)
            assert proposal.proposal_id not in state  # sealed
            still = await session.call_tool(
                "append_note", arguments, input_responses=ACCEPT, request_state=state,
                allow_input_required=True,
            )  # fmt: skip
            _form(still)  # accepting the form is not an approval: asked again
            latest = _state(still)
            assert _proposal_status(sqlite_url, proposal) is ProposalStatus.PENDING
            tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
            with pytest.raises(MCPError) as refused:
                await session.call_tool(
                    "append_note", arguments, input_responses=ACCEPT, request_state=tampered,
                    allow_input_required=True,
                )  # fmt: skip
            with pytest.raises(MCPError) as foreign:  # the state of another call
                await session.call_tool(
                    "append_note", {"text": "other"}, input_responses=ACCEPT,
                    request_state=state, allow_input_required=True,
                )  # fmt: skip
            approve = await asyncio.to_thread(
                run_cli, "proposals", "approve", proposal.proposal_id, "--db", sqlite_url
            )
            assert approve.returncode == 0, approve.stderr
            done = await session.call_tool(
                "append_note", arguments, input_responses=ACCEPT,
                request_state=latest, allow_input_required=True,
            )  # fmt: skip
            replay = await session.call_tool(
                "append_note", arguments, input_responses=ACCEPT,
                request_state=latest, allow_input_required=True,
            )  # fmt: skip
            return {"proposal": proposal, "form": form, "done": done, "replay": replay,
                    "refused": refused.value, "foreign": foreign.value}  # fmt: skip

    out = asyncio.run(body())
    proposal: Proposal = out["proposal"]
    message = out["form"].message
    assert proposal.proposal_id in message and proposal.args_hash[:16] in message
    assert f"supervisor proposals approve {proposal.proposal_id}" in message
    assert f"https://sup.example/p/{proposal.proposal_id}?h={proposal.args_hash}" in message
    assert "append_note" in message and "never approves" in message
    assert "Invalid or expired requestState" in str(out["refused"])
    assert "Invalid or expired requestState" in str(out["foreign"])
    done, replay = out["done"], out["replay"]
    assert isinstance(done, CallToolResult) and not done.is_error
    assert done.structured_content == {"appended": "later"}
    assert isinstance(replay, CallToolResult)
    assert replay.structured_content == {"appended": "later"}  # recorded, not run again
    assert _notes(notes) == [{"text": "later", "key": proposal.proposal_id}]
    assert [p.proposal_id for p in _proposals(sqlite_url)] == [proposal.proposal_id]
    assert _proposal_status(sqlite_url, proposal) is ProposalStatus.EXECUTED


def _proposal_status(url: str, proposal: Proposal) -> ProposalStatus:
    with SQLModelProvider(url) as provider:
        return provider.ledger.get(proposal.proposal_id).status


def test_the_sdk_client_loop_gets_a_rejection_and_a_declined_wait_as_error_results(
    env: dict[str, str], sqlite_url: str
) -> None:
    """``Client.call_tool`` drives the rounds itself, asking its elicitation callback."""
    notes = Path(env["NOTES_FILE"])
    asked: list[str] = []
    answers: dict[str, Literal["accept", "decline"]] = {"reject": "accept", "decline": "decline"}

    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        pending = [p for p in _proposals(sqlite_url) if p.status is ProposalStatus.PENDING]
        (proposal,) = pending
        text = proposal.arguments["text"]
        if text == "reject":
            rejected = await asyncio.to_thread(
                run_cli, "proposals", "reject", proposal.proposal_id, "--reason", "not today",
                "--db", sqlite_url,
            )  # fmt: skip
            assert rejected.returncode == 0, rejected.stderr
        return ElicitResult(action=answers[text])

    async def body() -> tuple[CallToolResult, CallToolResult]:
        async with Client(_params(env), elicitation_callback=on_elicit) as client:
            rejected = await client.call_tool("append_note", {"text": "reject"})
            declined = await client.call_tool("append_note", {"text": "decline"})
            with SQLModelProvider(sqlite_url) as provider:  # no round outstanding any more
                (row,) = [p for p in provider.ledger.list_processes() if p.kind == "mcp-gateway"]
                assert row.status == "running"
            return rejected, declined

    rejected, declined = asyncio.run(body())
    assert len(asked) == 2
    assert rejected.is_error is True
    assert "not today" in rejected.content[0].text  # type: ignore[union-attr]
    assert "did not run" in rejected.content[0].text  # type: ignore[union-attr]
    assert declined.is_error is True
    text = declined.content[0].text  # type: ignore[union-attr]
    assert "chose not to wait" in text and "did not run" in text and "pending" in text
    proposals = {p.arguments["text"]: p for p in _proposals(sqlite_url)}
    assert proposals["reject"].status is ProposalStatus.REJECTED
    assert proposals["decline"].status is ProposalStatus.PENDING
    assert _notes(notes) == []


def test_a_restarted_gateway_refuses_the_old_state_and_an_identical_call_joins(
    env: dict[str, str], sqlite_url: str
) -> None:
    arguments = {"text": "across restarts"}

    async def first_round() -> str:
        async with Client(_params(env), elicitation_callback=_refuse_to_be_asked) as client:
            return _state(
                await client.session.call_tool("append_note", arguments, allow_input_required=True)
            )

    async def after_restart(state: str) -> tuple[MCPError, Any]:
        async with Client(_params(env), elicitation_callback=_refuse_to_be_asked) as client:
            with pytest.raises(MCPError) as refused:  # another process's key
                await client.session.call_tool(
                    "append_note", arguments, input_responses=ACCEPT, request_state=state,
                    allow_input_required=True,
                )  # fmt: skip
            again = await client.session.call_tool(
                "append_note", arguments, allow_input_required=True
            )
            return refused.value, again

    state = asyncio.run(first_round())
    refused, again = asyncio.run(after_restart(state))
    assert "Invalid or expired requestState" in str(refused)
    (proposal,) = _proposals(sqlite_url)  # joined, not proposed again
    assert proposal.proposal_id in _form(again).message
    assert _notes(Path(env["NOTES_FILE"])) == []


def test_a_call_that_expired_between_rounds_is_an_error_result(
    env: dict[str, str], sqlite_url: str
) -> None:
    async def body() -> Any:
        async with Client(_params(env, "--ttl", "2"),
                          elicitation_callback=_refuse_to_be_asked) as client:  # fmt: skip
            first = await client.session.call_tool(
                "append_note", {"text": "too late"}, allow_input_required=True
            )
            await asyncio.sleep(2.5)
            return await client.session.call_tool(
                "append_note", {"text": "too late"}, input_responses=ACCEPT,
                request_state=_state(first), allow_input_required=True,
            )  # fmt: skip

    result = asyncio.run(body())
    assert isinstance(result, CallToolResult) and result.is_error is True
    assert "expired" in result.content[0].text  # type: ignore[union-attr]
    (proposal,) = _proposals(sqlite_url)
    assert proposal.status is ProposalStatus.EXPIRED
    assert _notes(Path(env["NOTES_FILE"])) == []


def test_an_edit_between_rounds_is_followed_and_the_edited_call_runs_once(
    env: dict[str, str], sqlite_url: str
) -> None:
    arguments = {"text": "draft"}

    async def body() -> tuple[Proposal, Proposal, str, Any]:
        async with Client(_params(env), elicitation_callback=_refuse_to_be_asked) as client:
            session = client.session
            first = await session.call_tool("append_note", arguments, allow_input_required=True)
            (original,) = _proposals(sqlite_url)
            with SQLModelProvider(sqlite_url) as provider:
                edited = provider.ledger.edit(
                    original.proposal_id, {"text": "final"}, "operator@example.com"
                )
            still = await session.call_tool(
                "append_note", arguments, input_responses=ACCEPT, request_state=_state(first),
                allow_input_required=True,
            )  # fmt: skip
            message = _form(still).message
            with SQLModelProvider(sqlite_url) as provider:
                provider.ledger.approve(edited.proposal_id, "operator@example.com")
            done = await session.call_tool(
                "append_note", arguments, input_responses=ACCEPT, request_state=_state(still),
                allow_input_required=True,
            )  # fmt: skip
            return original, edited, message, done

    original, edited, message, done = asyncio.run(body())
    assert edited.proposal_id in message and original.proposal_id not in message
    assert isinstance(done, CallToolResult) and not done.is_error
    assert done.structured_content == {"appended": "final"}
    assert _notes(Path(env["NOTES_FILE"])) == [{"text": "final", "key": edited.proposal_id}]
