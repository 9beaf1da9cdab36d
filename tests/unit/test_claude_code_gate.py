"""The Claude Code hook without Claude Code: its answers, its ledger side and its fail-closed
paths, on a real SQLite ledger with a manual clock."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from supervisor.claude_code.answers import Allow, Deny, hook_output
from supervisor.claude_code.events import HookEvent, HookInputInvalid, parse_event
from supervisor.claude_code.gate import gate, record_outcome, schema_hash
from supervisor.claude_code.transcript import turn_of
from supervisor.cli.main import cli
from supervisor.ledger import ManualClock
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider


def _event(**fields: Any) -> HookEvent:
    base: dict[str, Any] = {
        "hook_event_name": "PreToolUse", "session_id": "s-1", "cwd": "/work",
        "tool_name": "Bash", "tool_input": {"command": "touch marker"}, "tool_use_id": "toolu_1",
    }  # fmt: skip
    return HookEvent.model_validate(base | fields)


@pytest.fixture
def manual() -> ManualClock:
    return ManualClock()


@pytest.fixture
def ledger(tmp_path: Path, manual: ManualClock) -> Iterator[ApprovalLedger]:
    with SQLModelProvider(f"sqlite:///{tmp_path / 'ledger.db'}", clock=manual) as provider:
        yield provider.ledger


def _deciding(action: Any) -> Any:
    """A ``waiting`` hook that decides the pending proposal as another process would."""

    @contextmanager
    def waiting(proposal: Proposal) -> Iterator[None]:
        action(proposal)
        yield

    return waiting


# -- the output format ----------------------------------------------------------------------


def test_pre_tool_use_answers_in_the_documented_shape() -> None:
    assert hook_output("PreToolUse", Allow("ok")) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "allow",
            "permissionDecisionReason": "ok",
        }
    }  # fmt: skip
    edited = hook_output("PreToolUse", Allow("ok", updated_input={"command": "ls"}))
    assert edited["hookSpecificOutput"]["updatedInput"] == {"command": "ls"}
    denied = hook_output("PreToolUse", Deny("no"))["hookSpecificOutput"]
    assert denied["permissionDecision"] == "deny" and denied["permissionDecisionReason"] == "no"
    assert "updatedInput" not in denied


def test_permission_request_answers_with_a_decision_behavior() -> None:
    allow = hook_output("PermissionRequest", Allow("ok", updated_input={"a": 1}))
    assert allow == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow", "updatedInput": {"a": 1}},
        }
    }
    deny = hook_output("PermissionRequest", Deny("no"))["hookSpecificOutput"]["decision"]
    assert deny == {"behavior": "deny", "message": "no"}
    with pytest.raises(ValueError):
        hook_output("PostToolUse", Deny("no"))


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"\xff\xfe",
        b"[1, 2]",
        b'{"hook_event_name": "PreToolUse"}',
        b'{"hook_event_name": "Stop", "session_id": "s", "tool_name": "Bash"}',
        b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash", '
        b'"tool_input": "rm -rf /"}',
    ],
)
def test_bad_stdin_is_refused(raw: bytes) -> None:
    with pytest.raises(HookInputInvalid):
        parse_event(raw)


def test_bad_stdin_blocks_with_exit_code_2_and_never_allows(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["hook", "claude-code", "--db", str(tmp_path / "l.db")], input=b"{oops"
    )
    assert result.exit_code == 2
    assert "allow" not in result.stdout
    assert "supervisor hook:" in result.stderr and "blocked" in result.stderr


def test_a_ledger_that_cannot_be_opened_blocks(tmp_path: Path) -> None:
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"this is not a database" * 100)
    event = _event().model_dump_json()
    result = CliRunner().invoke(cli, ["hook", "claude-code", "--db", str(broken)], input=event)
    assert result.exit_code == 2, result.output
    assert "allow" not in result.stdout
    assert "error [" in result.stderr


# -- the ledger side ------------------------------------------------------------------------


def test_approved_call_is_claimed_before_allow(ledger: ApprovalLedger) -> None:
    answer = gate(
        ledger, _event(), wait_seconds=30,
        waiting=_deciding(lambda p: ledger.approve(p.proposal_id, "alice")),
    )  # fmt: skip
    assert isinstance(answer, Allow) and answer.updated_input is None
    (proposal,) = ledger.list().items
    assert proposal.status is ProposalStatus.EXECUTING
    assert proposal.tool_schema_hash == schema_hash("Bash")
    assert proposal.runtime == "claude-code" and proposal.owner == "claude-code"
    assert proposal.thread_id == "s-1" and proposal.call_id == "toolu_1"
    assert proposal.execution_target == {"runtime": "claude-code", "cwd": "/work"}


def test_rejection_denies_with_the_reason(ledger: ApprovalLedger) -> None:
    answer = gate(
        ledger, _event(), wait_seconds=30,
        waiting=_deciding(lambda p: ledger.reject(p.proposal_id, "bob", "not on main")),
    )  # fmt: skip
    assert isinstance(answer, Deny)
    assert "rejected" in answer.reason and "not on main" in answer.reason


def test_cancelled_call_is_denied(ledger: ApprovalLedger) -> None:
    answer = gate(
        ledger, _event(), wait_seconds=30,
        waiting=_deciding(lambda p: ledger.cancel(p.proposal_id, "bob")),
    )  # fmt: skip
    assert isinstance(answer, Deny) and "cancelled" in answer.reason


def test_expired_call_is_denied(ledger: ApprovalLedger, manual: ManualClock) -> None:
    answer = gate(
        ledger, _event(), wait_seconds=30, waiting=_deciding(lambda p: manual.advance(3600))
    )
    assert isinstance(answer, Deny) and "expired" in answer.reason
    (proposal,) = ledger.list().items
    assert proposal.status is ProposalStatus.EXPIRED


def test_no_decision_in_time_cancels_the_call_and_denies(ledger: ApprovalLedger) -> None:
    answer = gate(ledger, _event(), wait_seconds=0.2)
    assert isinstance(answer, Deny) and "No decision" in answer.reason
    (proposal,) = ledger.list().items
    assert proposal.status is ProposalStatus.CANCELLED  # nobody can approve it any more


def test_an_edit_is_followed_and_answered_with_the_edited_input(ledger: ApprovalLedger) -> None:
    def edit_then_approve(proposal: Proposal) -> None:
        edited = ledger.edit(proposal.proposal_id, {"command": "touch other"}, "alice")
        ledger.approve(edited.proposal_id, "alice")

    answer = gate(ledger, _event(), wait_seconds=30, waiting=_deciding(edit_then_approve))
    assert isinstance(answer, Allow)
    assert answer.updated_input == {"command": "touch other"}


def test_post_tool_use_records_a_redacted_bounded_outcome(ledger: ApprovalLedger) -> None:
    gate(
        ledger, _event(), wait_seconds=30,
        waiting=_deciding(lambda p: ledger.approve(p.proposal_id, "alice")),
    )  # fmt: skip
    secret = "sk-ant-api03-" + "x" * 40
    response = {"stdout": "key=" + secret + "\n" + "y" * 200_000, "stderr": "", "api_key": "k"}
    post = _event(hook_event_name="PostToolUse", tool_response=response)
    execution = record_outcome(ledger, post)
    assert execution is not None and execution.state == "executed"
    assert execution.outcome_status == "success" and execution.result_ref is not None
    digest = execution.result_ref.removeprefix("blob:")
    blob = ledger.get_blob(digest)
    assert blob is not None and blob.content is not None
    stored = blob.content.decode()
    assert secret not in stored and len(stored) < 70_000
    assert json.loads(stored)["truncated_from_chars"] > 200_000
    assert record_outcome(ledger, post) is None  # already finished: nothing to record


def test_post_tool_use_of_an_ungated_call_records_nothing(ledger: ApprovalLedger) -> None:
    assert record_outcome(ledger, _event(hook_event_name="PostToolUse", tool_use_id="x")) is None


def test_the_assistant_turn_is_read_from_the_transcript(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    lines = [
        {"type": "user", "message": {"role": "user", "content": "toolu_9 mentioned"}},
        "not json toolu_9",
        {"type": "assistant", "message": {"role": "assistant", "id": "msg_1", "content": [
            {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {}}]}},
    ]  # fmt: skip
    transcript.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    )
    assert turn_of(str(transcript), "toolu_9") == "msg_1"
    assert turn_of(str(transcript), "toolu_0") is None
    assert turn_of(str(tmp_path / "missing.jsonl"), "toolu_9") is None
    assert turn_of(None, "toolu_9") is None


def test_a_wait_stopped_by_a_signal_cancels_the_call(ledger: ApprovalLedger) -> None:
    class Stopped(BaseException):
        pass

    def stop(proposal: Proposal) -> None:
        raise Stopped

    with pytest.raises(Stopped):
        gate(ledger, _event(), wait_seconds=30, waiting=_deciding(stop))
    (proposal,) = ledger.list().items
    assert proposal.status is ProposalStatus.CANCELLED


def test_a_permission_request_call_is_found_by_its_arguments(ledger: ApprovalLedger) -> None:
    request = _event(hook_event_name="PermissionRequest", tool_use_id=None)
    answer = gate(
        ledger, request, wait_seconds=30,
        waiting=_deciding(lambda p: ledger.approve(p.proposal_id, "alice")),
    )  # fmt: skip
    assert isinstance(answer, Allow)
    other = _event(hook_event_name="PostToolUse", tool_input={"command": "ls"}, tool_response={})
    assert record_outcome(ledger, other) is None  # other arguments: not this call
    post = _event(hook_event_name="PostToolUse", tool_response={"stdout": "", "stderr": ""})
    execution = record_outcome(ledger, post)
    assert execution is not None and execution.state == "executed"


def test_a_call_with_float_arguments_is_claimed(ledger: ApprovalLedger) -> None:
    event = _event(tool_name="Write", tool_input={"file_path": "/w/a", "limit": 1.0, "n": 2e3})
    answer = gate(
        ledger, event, wait_seconds=30,
        waiting=_deciding(lambda p: ledger.approve(p.proposal_id, "alice")),
    )  # fmt: skip
    assert isinstance(answer, Allow), answer
