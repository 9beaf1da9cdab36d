"""Edit works end to end: an agent waiting in a real subprocess runs the approved edit, once.

The agent pauses in one subprocess, waits for the decision in a second (``wait-resume`` with the
*original* proposal id), and the human edits and decides with the real ``supervisor proposals``
CLI. Side effects are counted in an outside file; the model's requests are read back from the
scripted model.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli
from support.runtime_runs import pause, start_waiter

from supervisor.ledger.chain import EDIT_MESSAGE
from supervisor.ledger.errors import ReservedArgumentEdit
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall, Turn

TESTS_DIR = Path(__file__).resolve().parents[1]
ADA = {"name": "Ada", "email": "ada@example.com"}


def _env(tmp_path: Path, url: str, model: ScriptedModel) -> dict[str, str]:
    env = dict(os.environ)
    env.update(model.env())
    env["SUPERVISOR_DB"] = url
    env["SIDE_EFFECT_FILE"] = str(tmp_path / "side_effects.log")
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), env.get("PYTHONPATH", "")])
    return env


def _script() -> list[Turn]:
    return [CallTools([ToolCall("create_customer", ADA)]), Reply("Done as the reviewer asked.")]


def _side_effects(tmp_path: Path) -> list[str]:
    path = tmp_path / "side_effects.log"
    return path.read_text().splitlines() if path.exists() else []


def _finish(waiter: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = waiter.communicate(timeout=120)
    assert waiter.returncode == 0, err
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def _cli(env: dict[str, str], *args: str) -> str:
    done = run_cli("proposals", *args, "--approver", "reviewer@example.com", env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _edit(env: dict[str, str], proposal_id: str, *sets: str) -> str:
    flags = [part for item in sets for part in ("--set", item)]
    out = _cli(env, "edit", proposal_id, *flags, "--reason", "fix the address", "--json")
    new_id: str = json.loads(out)["proposal_id"]
    return new_id


def _tool_message(model: ScriptedModel) -> dict[str, Any]:
    """The tool message of the model's last request, parsed (it is JSON, never markup)."""
    last = model.requests[-1].messages
    tool = [message for message in last if message.get("role") == "tool"]
    assert len(tool) == 1
    body: dict[str, Any] = json.loads(tool[0]["content"])
    return body


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_edit_then_approve_runs_the_edit_once_and_tells_the_model_the_diff(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if engine == "sqlite" else "postgres_url")
    with ScriptedModel(_script()) as model:
        env = _env(tmp_path, url, model)
        original = pause(env)
        waiter = start_waiter(env, original)
        edited = _edit(env, original, "email=ada@lovelace.example")
        _cli(env, "approve", edited)
        resumed = _finish(waiter)
        assert resumed == {
            "consumed": True, "ok": True, "error_code": None, "status": "executed",
            "assistant_response": "Done as the reviewer asked.", "proposal_id": edited,
        }  # fmt: skip
        body = _tool_message(model)
    assert _side_effects(tmp_path) == ["create_customer Ada ada@lovelace.example"]
    assert body["edited_by_human"] == {
        "message": EDIT_MESSAGE,
        "edits": 1,
        "changed": [{"path": "$.email", "old": "ada@example.com", "new": "ada@lovelace.example"}],
        "arguments": {"name": "Ada", "email": "ada@lovelace.example"},
    }
    assert body["result"]["email"] == "ada@lovelace.example"
    with SQLModelProvider(url) as provider:
        old, new = provider.ledger.get(original), provider.ledger.get(edited)
        assert (old.status.value, new.status.value) == ("superseded", "executed")
        # The edit keeps the original's TTL (a short window stays short).
        assert new.expires_at - new.created_at == old.expires_at - old.created_at
        assert provider.ledger.execution(original) is None
        assert provider.ledger.verify().ok


def test_two_edits_run_the_last_one_and_the_diff_is_against_the_models_call(
    tmp_path: Path, sqlite_url: str
) -> None:
    with ScriptedModel(_script()) as model:
        env = _env(tmp_path, sqlite_url, model)
        original = pause(env)
        waiter = start_waiter(env, original)
        first = _edit(env, original, "email=ada@first.example")
        second = _edit(env, first, "name=Augusta Ada", "email=ada@second.example")
        _cli(env, "approve", second)
        resumed = _finish(waiter)
        body = _tool_message(model)
    assert (resumed["proposal_id"], resumed["status"]) == (second, "executed")
    assert _side_effects(tmp_path) == ["create_customer Augusta Ada ada@second.example"]
    note = body["edited_by_human"]
    assert note["edits"] == 2
    assert note["changed"] == [
        {"path": "$.email", "old": "ada@example.com", "new": "ada@second.example"},
        {"path": "$.name", "old": "Ada", "new": "Augusta Ada"},
    ]


def test_an_edit_rejected_after_editing_runs_nothing_and_the_agent_is_told(
    tmp_path: Path, sqlite_url: str
) -> None:
    with ScriptedModel(_script()) as model:
        env = _env(tmp_path, sqlite_url, model)
        original = pause(env)
        waiter = start_waiter(env, original)
        edited = _edit(env, original, "email=ada@lovelace.example")
        _cli(env, "reject", edited, "--reason", "on second thought, no")
        resumed = _finish(waiter)
        body = _tool_message(model)
    assert resumed["proposal_id"] == edited
    assert (resumed["error_code"], resumed["status"], resumed["consumed"]) == (
        "denied", "rejected", False,
    )  # fmt: skip
    assert body["error"]["code"] == "denied"
    assert body["error"]["reason"] == "on second thought, no"
    assert _side_effects(tmp_path) == []


def test_an_edit_with_a_reserved_name_is_refused_and_the_original_still_waits(
    tmp_path: Path, sqlite_url: str
) -> None:
    with ScriptedModel(_script()) as model:
        env = _env(tmp_path, sqlite_url, model)
        original = pause(env)
        waiter = start_waiter(env, original)
        refused = run_cli("proposals", "edit", original, "--set", "approved=true", env=env)
        assert refused.returncode == 2
        assert refused.stderr.startswith("error [invalid_edit]: 'approved': reserved")
        with SQLModelProvider(sqlite_url) as provider:  # the ledger refuses it on its own too
            with pytest.raises(ReservedArgumentEdit):
                provider.ledger.edit(original, {**ADA, "confirm": True}, "reviewer@example.com")
            assert provider.ledger.get(original).status.value == "pending"
        assert waiter.poll() is None  # still waiting on the original
        _cli(env, "approve", original)
        resumed = _finish(waiter)
    assert (resumed["proposal_id"], resumed["status"]) == (original, "executed")
    assert _side_effects(tmp_path) == ["create_customer Ada ada@example.com"]


def test_an_approved_edit_the_tool_refuses_is_withdrawn_and_the_model_is_told(
    tmp_path: Path, sqlite_url: str
) -> None:
    with ScriptedModel(_script()) as model:
        env = _env(tmp_path, sqlite_url, model)
        original = pause(env)
        waiter = start_waiter(env, original)
        # Not a string: the tool's schema refuses it when it runs (the registry records no
        # schema for this SDK tool, so neither the CLI nor the TUI can check it beforehand).
        edited = _edit(env, original, "email=42")
        _cli(env, "approve", edited)
        resumed = _finish(waiter)
        body = _tool_message(model)
    assert (resumed["proposal_id"], resumed["status"], resumed["error_code"]) == (
        edited, "cancelled", "cancelled",
    )  # fmt: skip
    assert body["error"]["code"] == "cancelled"
    assert "do not fit the tool" in body["error"]["reason"]
    assert _side_effects(tmp_path) == []


def test_a_supervisor_run_agent_runs_the_approved_edit(tmp_path: Path, sqlite_url: str) -> None:
    from support.cli import SUPERVISOR
    from support.run_factories import CRM_QUERY, crm_turn

    assert SUPERVISOR is not None
    with ScriptedModel(crm_turn) as model:
        env = _env(tmp_path, sqlite_url, model)
        run = subprocess.Popen(
            [SUPERVISOR, "run", "support.run_factories:crm_agent", "--input", CRM_QUERY],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert run.stdout is not None
        original = ""
        for line in run.stdout:
            if line.startswith("[run] waiting for a decision on "):
                original = line.split()[6]
                break
        assert original, run.stderr.read() if run.stderr else ""
        edited = _edit(env, original, "email=ada@lovelace.example")
        _cli(env, "approve", edited)
        out, err = run.communicate(timeout=120)
        body = _tool_message(model)
    assert run.returncode == 0, err
    assert f"[run] edited by a human: {original} -> {edited}" in out
    assert "[run] completed: Done: " in out
    assert _side_effects(tmp_path) == ["create_customer Ada Lovelace ada@lovelace.example"]
    assert body["edited_by_human"]["changed"] == [
        {"path": "$.email", "old": "ada@example.com", "new": "ada@lovelace.example"}
    ]
