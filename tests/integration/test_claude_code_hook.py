"""The real Claude Code CLI behind the ledger: its hook proposes, waits, claims and records.

Each test runs ``claude -p ... --output-format json`` (from tests/node/claude-code) in a
throwaway HOME whose ``~/.claude/settings.json`` got the hooks from ``supervisor hook install
claude-code --user``, pointed at the scripted model's Anthropic Messages API on loopback and at a
temporary SQLite ledger; decisions come from other processes (``supervisor proposals ...``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.claude_code import (
    bash_then_echo,
    finish,
    make_home,
    wait_pending,
    wait_process,
)
from support.cli import SUPERVISOR

from supervisor.ledger.models import ProposalStatus
from supervisor.testing import ScriptedModel

pytestmark = pytest.mark.slow


def test_approval_from_another_process_lets_the_command_run_and_records_its_outcome(
    tmp_path: Path,
) -> None:
    claude_home = make_home(tmp_path)
    with ScriptedModel(bash_then_echo("touch marker && echo made-it")) as model:
        process = claude_home.start(model, "make a marker")
        with claude_home.ledger() as ledger:
            pending = wait_pending(ledger)
            assert not (claude_home.project / "marker").exists()  # blocked until decided
            assert pending.runtime == "claude-code"
            assert pending.tool_name == "Bash"
            assert pending.arguments["command"] == "touch marker && echo made-it"
            assert pending.execution_target == {
                "runtime": "claude-code", "cwd": str(claude_home.project.resolve()),
            }  # fmt: skip
            assert pending.turn_id is not None and pending.turn_id.startswith("msg_")
            waiting = wait_process(ledger, "waiting_for_approval")
            assert waiting[0].step is not None and waiting[0].step.detail == "Bash"
            assert pending.thread_id is not None and pending.thread_id in waiting[0].command
            approved = claude_home.supervisor("proposals", "approve", pending.proposal_id)
            assert approved.returncode == 0, approved.stderr
            result = finish(process)
            assert (claude_home.project / "marker").exists()
            assert "made-it" in result["result"]
            done = ledger.get(pending.proposal_id)
            execution = ledger.execution(pending.proposal_id)
    assert done.status is ProposalStatus.EXECUTED
    assert execution is not None and execution.outcome_status == "success"
    assert execution.executor.executor_id == f"claude-code:{pending.thread_id}"
    assert execution.result_ref is not None
    shown = claude_home.supervisor("proposals", "show", pending.proposal_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "executed"


def test_rejection_blocks_the_command_and_the_model_sees_the_reason(tmp_path: Path) -> None:
    claude_home = make_home(tmp_path)
    with ScriptedModel(bash_then_echo("touch marker")) as model:
        process = claude_home.start(model, "make a marker")
        with claude_home.ledger() as ledger:
            pending = wait_pending(ledger)
            rejected = claude_home.supervisor(
                "proposals", "reject", pending.proposal_id, "--reason", "no files today"
            )
            assert rejected.returncode == 0, rejected.stderr
            result = finish(process)
            assert ledger.get(pending.proposal_id).status is ProposalStatus.REJECTED
            assert ledger.execution(pending.proposal_id) is None
    assert not (claude_home.project / "marker").exists()
    assert "no files today" in result["result"]  # the model was told why
    assert "rejected" in result["result"]


def test_an_operator_edit_runs_the_edited_arguments(tmp_path: Path) -> None:
    claude_home = make_home(tmp_path)
    with ScriptedModel(bash_then_echo("touch marker")) as model:
        process = claude_home.start(model, "make a marker")
        with claude_home.ledger() as ledger:
            pending = wait_pending(ledger)
            edited = claude_home.supervisor(
                "proposals", "edit", pending.proposal_id, "--set", "command=touch edited",
                "--json",
            )  # fmt: skip
            assert edited.returncode == 0, edited.stderr
            new_id = json.loads(edited.stdout)["proposal_id"]
            approved = claude_home.supervisor("proposals", "approve", new_id)
            assert approved.returncode == 0, approved.stderr
            finish(process)
            assert ledger.get(new_id).status is ProposalStatus.EXECUTED
    assert (claude_home.project / "edited").exists()
    assert not (claude_home.project / "marker").exists()


def test_a_policy_deny_rule_decides_at_once_and_leaves_nothing_pending(tmp_path: Path) -> None:
    claude_home = make_home(tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rules]]\nname = "no shell"\nverdict = "deny"\nreason = "No shell in this repo"\n'
        'tool = "Bash"\n'
    )
    applied = claude_home.supervisor("policy", "apply", str(policy), "--yes")
    assert applied.returncode == 0, applied.stderr
    with ScriptedModel(bash_then_echo("touch marker")) as model:
        result = finish(claude_home.start(model, "make a marker"))
    with claude_home.ledger() as ledger:
        proposals = ledger.list().items
    assert len(proposals) == 1
    assert proposals[0].status is ProposalStatus.REJECTED
    assert proposals[0].decided_by_rule is not None
    assert not ledger.list(status="pending").items
    assert not (claude_home.project / "marker").exists()
    assert "policy denied" in result["result"]


def test_install_and_uninstall_leave_other_settings_byte_identical(tmp_path: Path) -> None:
    claude_home = make_home(tmp_path)
    settings = claude_home.project / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = (
        json.dumps(
            {
                "model": "claude-opus",
                "permissions": {"allow": ["Bash(ls:*)"]},
                "hooks": {
                    "PreToolUse": [
                        {"matcher": "Write", "hooks": [{"type": "command", "command": "lint.sh"}]}
                    ],
                    "Stop": [{"hooks": [{"type": "command", "command": "notify.sh"}]}],
                },
            },
            indent=2,
        )
        + "\n"
    )
    settings.write_text(original)
    for _ in range(2):  # idempotent
        installed = claude_home.supervisor("hook", "install", "claude-code", "--project")
        assert installed.returncode == 0, installed.stderr
    data = json.loads(settings.read_text())
    ours = [
        hook["command"]
        for group in data["hooks"]["PreToolUse"]
        for hook in group["hooks"]
        if "hook claude-code" in hook["command"]
    ]
    assert len(ours) == 1
    assert data["hooks"]["Stop"] and data["permissions"] == {"allow": ["Bash(ls:*)"]}
    for _ in range(2):
        removed = claude_home.supervisor("hook", "uninstall", "claude-code", "--project")
        assert removed.returncode == 0, removed.stderr
    assert settings.read_text() == original


def test_a_failing_command_is_recorded_as_a_failed_execution(tmp_path: Path) -> None:
    claude_home = make_home(tmp_path)
    with ScriptedModel(bash_then_echo("echo broken >&2; exit 3")) as model:
        process = claude_home.start(model, "fail")
        with claude_home.ledger() as ledger:
            pending = wait_pending(ledger)
            approved = claude_home.supervisor("proposals", "approve", pending.proposal_id)
            assert approved.returncode == 0, approved.stderr
            finish(process)
            execution = ledger.execution(pending.proposal_id)
            status = ledger.get(pending.proposal_id).status
    assert status is ProposalStatus.FAILED, execution
    assert execution is not None and execution.outcome_status == "error"
    assert execution.reason is not None and "broken" in execution.reason


def test_stopping_the_waiting_hook_cancels_the_call_and_denies(tmp_path: Path) -> None:
    claude_home = make_home(tmp_path)
    with ScriptedModel(bash_then_echo("touch marker")) as model:
        process = claude_home.start(model, "make a marker")
        with claude_home.ledger() as ledger:
            pending = wait_pending(ledger)
            (waiting,) = wait_process(ledger, "waiting_for_approval")
            stopped = claude_home.supervisor("processes", "stop", waiting.process_id)
            assert stopped.returncode == 0, stopped.stderr
            result = finish(process)
            status = ledger.get(pending.proposal_id).status
    assert status is ProposalStatus.CANCELLED  # nobody can approve a call that will not run
    assert not (claude_home.project / "marker").exists()
    assert "stopped" in result["result"]


def test_the_hook_answers_permission_requests_too(tmp_path: Path) -> None:
    claude_home = make_home(tmp_path)
    settings = claude_home.home / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data["hooks"]["PermissionRequest"] = data["hooks"].pop("PreToolUse")  # gate prompts only
    settings.write_text(json.dumps(data, indent=2))
    with ScriptedModel(bash_then_echo("touch marker")) as model:
        process = claude_home.start(model, "make a marker")
        with claude_home.ledger() as ledger:
            pending = wait_pending(ledger)
            approved = claude_home.supervisor("proposals", "approve", pending.proposal_id)
            assert approved.returncode == 0, approved.stderr
            finish(process)
            status = ledger.get(pending.proposal_id).status
    assert (claude_home.project / "marker").exists()
    assert pending.call_id is None  # the event has no tool-use id...
    assert status is ProposalStatus.EXECUTED  # ...so PostToolUse found it by its arguments


def test_the_console_script_fails_closed_on_bad_stdin(tmp_path: Path) -> None:
    for raw in (b"", b"{not json", b'{"hook_event_name": "PreToolUse", "tool_name": "Bash"}'):
        blocked = subprocess.run(
            [str(SUPERVISOR), "hook", "claude-code", "--db", str(tmp_path / "ledger.db")],
            input=raw, capture_output=True, timeout=60,
        )  # fmt: skip
        assert blocked.returncode == 2, blocked
        assert blocked.stdout == b""  # no decision at all, let alone allow
        assert b"supervisor hook:" in blocked.stderr and b"blocked" in blocked.stderr
