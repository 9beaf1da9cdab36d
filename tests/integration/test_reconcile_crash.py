"""Crash mid-call, reconcile from the CLI, the thread continues: real processes, both engines.

An agent process pauses on ``charge_card``; the CLI approves it; a resumer process runs it and
is SIGKILLed inside the side effect (the tool blocks on a file after charging). Then, with no
one calling ``recover()``: ``supervisor proposals list`` shows ``needs_reconciliation``, ``show``
says what ran and how to reconcile, ``proposals reconcile`` records the human's finding
(audited with the OS identity; ``audit verify`` still passes), and a new process resuming the
proposal continues the thread: the scripted model's next request carries the finding. The
charge happened exactly once, counted in an outside file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_one_line_error, run_cli
from support.orphans import until

from supervisor import SQLModelProvider
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.testing import CallTools, Delay, Reply, ScriptedModel, ToolCall, Turn

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO = TESTS_DIR.parent
CHARGE = {"order": "A-1", "amount": 125}
FINAL = "The charge went through once; a human confirmed it."
FOUND = "The charge ch_A-1 is on the card statement"


def _env(tmp_path: Path, url: str, model: ScriptedModel) -> dict[str, str]:
    env = dict(os.environ)
    env.update(model.env())
    env["SUPERVISOR_DB"] = url
    env["SIDE_EFFECT_FILE"] = str(tmp_path / "side_effects.log")
    env["BLOCK_DIR"] = str(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), str(REPO)])
    return env


def _proc(env: dict[str, str], *args: str) -> dict[str, Any] | list[Any]:
    done = subprocess.run(
        [sys.executable, "-m", "support.reconcile_proc", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] | list[Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return parsed


def _charges(tmp_path: Path) -> list[str]:
    path = tmp_path / "side_effects.log"
    return path.read_text().splitlines() if path.exists() else []


def _json(env: dict[str, str], *args: str) -> dict[str, Any]:
    done = run_cli(*args, "--json", env=env)
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def _resumer(env: dict[str, str], proposal_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "support.reconcile_proc", "resume", proposal_id],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _killed_mid_call(tmp_path: Path, env: dict[str, str], proposal_id: str) -> int:
    """A resumer runs the approved charge and is SIGKILLed inside it; returns its pid."""
    runner = _resumer(env, proposal_id)
    try:
        until(
            lambda: (tmp_path / "started").exists() or runner.poll() is not None,
            "the call",
            timeout=60.0,
        )
        assert runner.poll() is None, runner.communicate()
        assert _charges(tmp_path) == ["charge_card A-1 125"]
        runner.send_signal(signal.SIGKILL)
        assert runner.wait(timeout=30) == -signal.SIGKILL
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    return runner.pid


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_killed_mid_call_is_reconciled_from_the_cli_and_the_thread_continues(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if engine == "sqlite" else "postgres_url")
    script: list[Turn] = [CallTools([ToolCall("charge_card", CHARGE)]), Reply(FINAL)]
    with ScriptedModel(script) as model:
        env = _env(tmp_path, url, model)
        (proposal_id,) = _proc(env, "pause", "Charge order A-1")
        approved = run_cli("proposals", "approve", proposal_id, "--reason", "ok", env=env)
        assert approved.returncode == 0, approved.stderr
        pid = _killed_mid_call(tmp_path, env, proposal_id)
        with SQLModelProvider(url) as provider:  # nothing ran recovery yet
            assert provider.ledger.get(proposal_id).status.value == "executing"

        # The CLI's list runs recovery by itself: the dead executor's call is flagged.
        listed = _json(env, "proposals", "list", "--status", "needs_reconciliation")
        assert [item["proposal_id"] for item in listed["items"]] == [proposal_id]
        assert listed["items"][0]["status"] == "needs_reconciliation"
        shown = run_cli("proposals", "show", proposal_id, env=env)
        assert shown.returncode == 0, shown.stderr
        assert f"agent:billing-agent (pid {pid} on " in shown.stdout
        assert "stopped before recording an outcome" in shown.stdout
        assert f"supervisor proposals reconcile {proposal_id} --as executed|failed" in shown.stdout
        body = _json(env, "proposals", "show", proposal_id)
        assert body["execution"]["executor"]["pid"] == pid
        assert body["reconciliation"]["outcome"] is None

        # Bad input: one line, exit 2, nothing recorded.
        no_reason = run_cli("proposals", "reconcile", proposal_id, "--as", "executed", env=env)
        assert_one_line_error(no_reason, "invalid_usage")
        blank = run_cli(
            "proposals", "reconcile", proposal_id, "--as", "executed", "--reason", " ", env=env
        )
        assert_one_line_error(blank, "reason_required")
        unknown = run_cli(
            "proposals", "reconcile", "0" * 32, "--as", "failed", "--reason", "x", env=env
        )
        assert_one_line_error(unknown, "proposal_not_found")
        with SQLModelProvider(url) as provider:
            other = provider.ledger.propose("charge_card", "5" * 64, {"order": "B", "amount": 1})
        pending = run_cli(
            "proposals", "reconcile", other.proposal_id, "--as", "failed", "--reason", "x",
            env=env,
        )  # fmt: skip
        assert_one_line_error(pending, "not_awaiting_reconciliation")

        done = _json(
            env, "proposals", "reconcile", proposal_id, "--as", "executed", "--reason", FOUND
        )
        assert done["status"] == "executed" and done["execution"]["state"] == "executed"
        again = run_cli(
            "proposals", "reconcile", proposal_id, "--as", "failed", "--reason", "x", env=env
        )
        assert_one_line_error(again, "approval_already_decided")
        assert "reconciled" in again.stderr
        verified = run_cli("audit", "verify", env=env)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        with SQLModelProvider(url) as provider:
            [record] = [r for r in provider.ledger.events_since(0, 1000) if r.action == "reconcile"]
        assert record.subject == proposal_id
        assert record.payload["outcome"] == "executed" and record.payload["reason"] == FOUND
        assert record.payload["identity"] == str(EnvironmentIdentity.current())
        assert record.payload["context"]["via"] == "cli"

        # A new process resumes the proposal: the thread continues with the human's finding.
        resumed = _proc(env, "resume", proposal_id)
        assert isinstance(resumed, dict)
        assert resumed["assistant_response"] == FINAL
        assert resumed["tool_result"]["reconciled"] == "executed"
        assert resumed["outcome"]["reason_code"] == "reconciled_executed"
        assert len(model.requests) == 2
        [tool_message] = [m for m in model.requests[1].messages if m["role"] == "tool"]
        told = json.loads(tool_message["content"])
        assert told["reconciled"] == "executed" and told["reason"] == FOUND
        assert "A human checked" in told["message"]

        second = _proc(env, "resume", proposal_id)  # the turn moved on: no model call, no charge
        assert isinstance(second, dict) and second["assistant_response"] is None
        assert len(model.requests) == 2
    assert _charges(tmp_path) == ["charge_card A-1 125"]


def test_two_resumers_of_a_reconciled_call_call_the_model_once(
    tmp_path: Path, sqlite_url: str
) -> None:
    script: list[Turn] = [
        CallTools([ToolCall("charge_card", CHARGE)]),
        Delay(3, Reply("Not charged: a human found the call did not take effect.")),
        Reply("A second continuation of the same turn."),
    ]
    with ScriptedModel(script) as model:
        env = _env(tmp_path, sqlite_url, model)
        (proposal_id,) = _proc(env, "pause", "Charge order A-1")
        assert run_cli("proposals", "approve", proposal_id, env=env).returncode == 0
        _killed_mid_call(tmp_path, env, proposal_id)
        done = run_cli(
            "proposals", "reconcile", proposal_id, "--as", "failed", "--reason", "not on file",
            env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        resumers = [_resumer(env, proposal_id) for _ in range(2)]
        results = []
        for resumer in resumers:
            out, err = resumer.communicate(timeout=120)
            assert resumer.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
        assert len(model.requests) == 2  # the pause, then one continuation: never two
        answers = [result["assistant_response"] for result in results]
        assert answers.count(None) == 1  # the other found the turn taken, and moved on
        assert "Not charged: a human found the call did not take effect." in answers
        assert _tool_message_of(model.requests[1])["reconciled"] == "failed"
    assert _charges(tmp_path) == ["charge_card A-1 125"]


def _tool_message_of(request: Any) -> dict[str, Any]:
    [message] = [m for m in request.messages if m["role"] == "tool"]
    told: dict[str, Any] = json.loads(message["content"])
    return told
