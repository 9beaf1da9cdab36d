"""``supervisor acp``: a real ACP agent (built with the SDK, ``support/acp_agent.py``) asks for
permission; the request becomes a proposal in a real SQLite ledger, a person decides from
another process (``supervisor proposals``) or a policy rule decides, and the agent receives
exactly its own option id. Once with ``--prompt`` (the supervisor is the client), once as a
relay in front of a real ACP client built with the SDK (the test is the editor).
"""

from __future__ import annotations

import asyncio
import getpass
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.interfaces import Client
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from support.cli import SUPERVISOR, run_cli

from supervisor.ledger.models import ProcessRecord, Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider

AGENT = Path(__file__).resolve().parents[1] / "support" / "acp_agent.py"
AGENT_ARGV = [sys.executable, str(AGENT)]
RUNTIME = "acp:acp_agent"
DENY_EDITS = """
[[rules]]
name = "no acp edits"
verdict = "deny"
reason = "ACP agents do not edit files here"
tool = "edit"
target = { runtime = "acp:acp_agent" }
"""
ALLOW_EDITS = DENY_EDITS.replace('"deny"', '"allow"').replace("do not edit", "may edit")


@pytest.fixture
def ledger(sqlite_url: str) -> Iterator[ApprovalLedger]:
    with SQLModelProvider(sqlite_url) as provider:
        yield provider.ledger


@pytest.fixture
def env(sqlite_url: str) -> dict[str, str]:
    return {**os.environ, "SUPERVISOR_DB": sqlite_url}


def _headless(env: dict[str, str], work: Path, name: str = "hello.txt") -> subprocess.Popen[str]:
    assert SUPERVISOR is not None
    return subprocess.Popen(
        [SUPERVISOR, "acp", "--prompt", f"write {name}", "--cwd", str(work), "--", *AGENT_ARGV],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _pending(ledger: ApprovalLedger, timeout: float = 60) -> Proposal:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page = ledger.list(status="pending", runtime=RUNTIME)
        if page.items:
            (proposal,) = page.items
            return proposal
        ledger.wait_for_change(ledger.head(), 0.2)
    raise AssertionError("no pending ACP proposal appeared")


def _acp_process(ledger: ApprovalLedger, status: str, timeout: float = 10) -> ProcessRecord:
    """The one ``acp`` process row, once it has ``status`` (its writes follow the proposal)."""
    deadline = time.monotonic() + timeout
    while True:
        (row,) = [p for p in ledger.list_processes() if p.kind == "acp"]
        if row.status == status or time.monotonic() > deadline:
            assert row.status == status, row
            return row
        time.sleep(0.05)


def _finish(process: subprocess.Popen[str]) -> tuple[str, str]:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, (process.returncode, out, err)
    return out, err


def _apply(env: dict[str, str], tmp_path: Path, policy: str) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(policy, encoding="utf-8")
    done = run_cli("policy", "apply", str(path), "--reason", "acp rules", env=env)
    assert done.returncode == 0, done.stderr


def test_headless_approval_answers_the_agents_allow_once_id(
    tmp_path: Path, env: dict[str, str], ledger: ApprovalLedger
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    agent = _headless(env, work)
    try:
        proposal = _pending(ledger)
        assert proposal.runtime == RUNTIME and proposal.owner == RUNTIME
        assert proposal.tool_name == "edit"
        assert proposal.user == f"{getpass.getuser()}@{socket.gethostname()}"
        assert proposal.thread_id is not None and proposal.thread_id.startswith("sess-")
        assert proposal.call_id is not None and proposal.call_id.startswith("call-")
        assert proposal.turn_id is not None and proposal.turn_id.startswith("acp-turn-")
        assert proposal.arguments["title"] == "Write hello.txt"
        assert proposal.arguments["rawInput"]["path"] == str(work / "hello.txt")
        target = proposal.execution_target
        assert target["runtime"] == RUNTIME and target["cwd"] == str(work.resolve())
        assert [option["optionId"] for option in target["options"]] == [
            "yes-once", "yes-always", "no-once",
        ]  # fmt: skip
        assert target["options"][0] == {"optionId": "yes-once", "name": "Allow once",
                                         "kind": "allow_once"}  # fmt: skip
        assert "Allow once [yes-once, allow_once]" in proposal.policy_reason
        row = _acp_process(ledger, "waiting_for_approval")
        assert row.step is not None and row.step.kind == "waiting_for_approval"
        assert row.step.detail == "edit"
        assert ledger.waiter_alive(proposal.proposal_id) is True

        approved = run_cli("proposals", "approve", proposal.proposal_id, env=env)
        assert approved.returncode == 0, approved.stderr
        out, err = _finish(agent)
    finally:
        agent.kill()
    assert "chosen: yes-once" in out, (out, err)
    assert (work / "hello.txt").read_text(encoding="utf-8") == "hello from the agent\n"
    assert "\x1b" not in out and "\x07" not in out  # the agent's escape sequence is shown escaped
    assert "\\u001b[2J" in out
    assert "[acp] stop reason: end_turn" in err
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.EXECUTED
    assert _acp_process(ledger, "exited").exit_code == 0
    traced = ledger.trace_events(agent_id=RUNTIME, kind="approval")
    assert [(e.outcome_status, e.payload.get("answer")) for e in traced] == [
        ("pending", None), ("answered", "option yes-once"),
    ]  # fmt: skip
    assert {e.run_id for e in traced} == {proposal.turn_id}


def test_headless_rejection_answers_the_agents_reject_once_id(
    tmp_path: Path, env: dict[str, str], ledger: ApprovalLedger
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    agent = _headless(env, work)
    try:
        proposal = _pending(ledger)
        rejected = run_cli("proposals", "reject", proposal.proposal_id, "--reason", "no", env=env)
        assert rejected.returncode == 0, rejected.stderr
        out, err = _finish(agent)
    finally:
        agent.kill()
    assert "chosen: no-once" in out, (out, err)
    assert not (work / "hello.txt").exists()
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.REJECTED


def test_an_edited_call_is_followed_and_never_allowed_with_other_arguments(
    tmp_path: Path, env: dict[str, str], ledger: ApprovalLedger
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    agent = _headless(env, work)
    try:
        original = _pending(ledger)
        edited = run_cli("proposals", "edit", original.proposal_id, "--set", "title=Other",
                         "--reason", "try another", env=env)  # fmt: skip
        assert edited.returncode == 0, edited.stderr
        successor = ledger.get(original.proposal_id).superseded_by_id
        assert successor is not None
        approved = run_cli("proposals", "approve", successor, env=env)
        assert approved.returncode == 0, approved.stderr
        out, err = _finish(agent)
    finally:
        agent.kill()
    assert "chosen: no-once" in out, (out, err)  # the agent would run its own arguments
    assert not (work / "hello.txt").exists()
    revoked = ledger.get(successor)
    assert revoked.status is ProposalStatus.CANCELLED
    assert "edited call cannot be passed" in (revoked.decision_reason or "")


@pytest.mark.parametrize(
    ("policy", "chosen", "status"),
    [(DENY_EDITS, "no-once", ProposalStatus.REJECTED),
     (ALLOW_EDITS, "yes-once", ProposalStatus.EXECUTED)],
    ids=["deny", "allow"],
)  # fmt: skip
def test_a_rule_answers_at_once_without_a_pending_proposal(
    tmp_path: Path,
    env: dict[str, str],
    ledger: ApprovalLedger,
    policy: str,
    chosen: str,
    status: ProposalStatus,
) -> None:
    _apply(env, tmp_path, policy)
    work = tmp_path / "work"
    work.mkdir()
    out, err = _finish(_headless(env, work))
    assert f"chosen: {chosen}" in out, (out, err)
    assert (work / "hello.txt").exists() is (chosen == "yes-once")
    (proposal,) = ledger.list(runtime=RUNTIME).items
    assert proposal.status is status
    assert proposal.decided_by_rule == "rule:no acp edits"
    assert "waiting for a decision" not in err  # never pending


class Editor:
    """The editor side: a real ACP client built with the SDK, in front of the relay."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.permission_requests: list[str] = []

    async def request_permission(
        self, options: list[PermissionOption], session_id: str, tool_call: ToolCallUpdate,
        **kwargs: Any,
    ) -> RequestPermissionResponse:  # fmt: skip
        self.permission_requests.append(tool_call.tool_call_id)  # the relay must not send it
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="yes-always")
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))

    def texts(self) -> list[str]:
        return [
            u["content"]["text"]
            for u in self.updates
            if u["sessionUpdate"] == "agent_message_chunk"
        ]


async def _as_editor(
    env: dict[str, str], work: Path, ledger: ApprovalLedger, decide: list[str]
) -> tuple[Editor, str, Proposal]:
    """Drive one prompt through ``supervisor acp -- agent``; decide its request with
    ``supervisor proposals DECIDE...`` (or ``cancel``: the editor's session/cancel)."""
    assert SUPERVISOR is not None
    editor = Editor()
    async with spawn_agent_process(
        cast_client(editor), SUPERVISOR, "acp", "--", *AGENT_ARGV, env=env,
        transport_kwargs={"stderr": None},
    ) as (connection, _process):  # fmt: skip
        await connection.initialize(
            protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()
        )
        session = await connection.new_session(cwd=str(work), mcp_servers=[])
        prompt = asyncio.create_task(
            connection.prompt(session_id=session.session_id, prompt=[text_block("write a.txt")])
        )
        proposal = await asyncio.to_thread(_pending, ledger)
        assert proposal.thread_id == session.session_id
        if decide == ["cancel"]:
            await connection.cancel(session_id=session.session_id)
        else:
            done = await asyncio.to_thread(run_cli, "proposals", *decide, proposal.proposal_id,
                                           env=env)  # fmt: skip
            assert done.returncode == 0, done.stderr
        response = await asyncio.wait_for(prompt, timeout=60)
    return editor, response.stop_reason, ledger.get(proposal.proposal_id)


def cast_client(editor: Editor) -> Client:
    from typing import cast

    return cast("Client", editor)


def test_relay_passes_messages_through_and_answers_permission_from_the_ledger(
    tmp_path: Path, env: dict[str, str], ledger: ApprovalLedger
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    editor, stop_reason, proposal = asyncio.run(_as_editor(env, work, ledger, ["approve"]))
    assert stop_reason == "end_turn"
    assert editor.permission_requests == []  # answered by the ledger, never asked of the editor
    assert "chosen: yes-once" in editor.texts()  # not the editor's "yes-always"
    assert editor.texts()[-1] == "\nend\x1b[2J\x1b]0;owned\x07"  # passed through unchanged
    started = [u for u in editor.updates if u["sessionUpdate"] == "tool_call"]
    assert started and started[0]["title"] == "Write a.txt" and started[0]["kind"] == "edit"
    assert (work / "a.txt").exists()
    assert proposal.status is ProposalStatus.EXECUTED
    assert proposal.execution_target["cwd"] == str(work)


def test_relay_rejection_and_editor_cancel(
    tmp_path: Path, env: dict[str, str], ledger: ApprovalLedger
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    editor, _, rejected = asyncio.run(_as_editor(env, work, ledger, ["reject", "--reason", "no"]))
    assert "chosen: no-once" in editor.texts() and rejected.status is ProposalStatus.REJECTED
    editor, _, cancelled = asyncio.run(_as_editor(env, work, ledger, ["cancel"]))
    assert "chosen: cancelled" in editor.texts()  # the ACP outcome for a cancelled prompt
    assert cancelled.status is ProposalStatus.CANCELLED
    assert editor.permission_requests == [] and not (work / "a.txt").exists()


def test_stopping_the_session_withdraws_its_pending_proposal(
    tmp_path: Path, env: dict[str, str], ledger: ApprovalLedger
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    agent = _headless(env, work)
    try:
        proposal = _pending(ledger)
        row = _acp_process(ledger, "waiting_for_approval")
        stopped = run_cli("processes", "stop", row.process_id, env=env)
        assert stopped.returncode == 0, stopped.stderr
        agent.communicate(timeout=60)
    finally:
        agent.kill()
    assert agent.returncode == 143
    withdrawn = ledger.get(proposal.proposal_id)
    assert withdrawn.status is ProposalStatus.CANCELLED
    assert withdrawn.decision_reason == "The ACP session ended before a decision."
    assert _acp_process(ledger, "stopped").exit_code == 143
    assert not (work / "hello.txt").exists()


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["/nonexistent/acp-agent"], "acp_agent_not_started"), (["false"], "acp_agent_failed")],
)
def test_an_agent_that_cannot_run_is_one_typed_error(
    env: dict[str, str], ledger: ApprovalLedger, argv: list[str], code: str
) -> None:
    done = run_cli("acp", "--prompt", "hi", "--", *argv, env=env)
    assert done.returncode == 2, done.stderr
    assert f"\nerror [{code}]: " in done.stderr  # after the line naming the process
    if code == "acp_agent_not_started":  # (a dead agent may also make the SDK log its loss)
        assert "Traceback" not in done.stderr, done.stderr
    assert _acp_process(ledger, "exited").exit_code == 1
