"""Pause in one process, load in a second, approve from a third, resume exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall, Turn

TESTS_DIR = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path, url: str, model: ScriptedModel) -> dict[str, str]:
    env = dict(os.environ)
    env.update(model.env())
    env["SUPERVISOR_DB"] = url
    env["SIDE_EFFECT_FILE"] = str(tmp_path / "side_effects.log")
    env["PYTHONPATH"] = str(TESTS_DIR)
    return env


def _run(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "support.runtime_proc", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else ""


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_pause_load_approve_resume_across_processes(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if engine == "sqlite" else "postgres_url")
    script: list[Turn] = [
        CallTools([ToolCall("create_customer", {"name": "Ada", "email": "ada@example.com"})]),
        Reply("Ada is in the CRM."),
    ]
    with ScriptedModel(script) as model:
        env = _env(tmp_path, url, model)
        (proposal_id,) = json.loads(_run(env, "pause", "Create Ada"))
        waiter = subprocess.Popen(
            [sys.executable, "-m", "support.runtime_proc", "wait-resume", proposal_id],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert waiter.stdout is not None
        assert waiter.stdout.readline().strip() == "waiting"
        _run(env, "approve", proposal_id)
        out, err = waiter.communicate(timeout=120)
        assert waiter.returncode == 0, err
        resumed = json.loads(out.strip().splitlines()[-1])
        assert resumed["consumed"] is True
        assert resumed["ok"] is True
        assert resumed["assistant_response"] == "Ada is in the CRM."
        second = json.loads(_run(env, "resume", proposal_id))
        assert second["error_code"] == "already_consumed"
        assert second["status"] == "executed"
    side_effects = (tmp_path / "side_effects.log").read_text().splitlines()
    assert side_effects == ["create_customer Ada ada@example.com"]
