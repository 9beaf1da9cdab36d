"""``supervisor resume``: an approved orphan is driven to its end by a new process.

Real parts: ``supervisor run`` agents in subprocesses killed with SIGKILL, the CLI in
subprocesses, the scripted chat-completions server on loopback, SQLite files and a real
PostgreSQL server. Side effects are counted in an outside file (``SIDE_EFFECT_FILE``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.cli import SUPERVISOR, run_cli
from support.orphans import CRM_FACTORY as FACTORY
from support.orphans import orphan_of_a_killed_run, side_effects, until
from support.run_factories import crm_turn

from supervisor import SQLModelProvider
from supervisor.ledger.models import ProcessRecord
from supervisor.ledger.service import ApprovalLedger
from supervisor.testing import ScriptedModel

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO = TESTS_DIR.parent


def environment(tmp_path: Path, url: str, model: ScriptedModel) -> dict[str, str]:
    env = dict(os.environ)
    env.update(model.env())
    env["SUPERVISOR_DB"] = url
    env["SUPERVISOR_LEASE_SECONDS"] = "2"
    env["SIDE_EFFECT_FILE"] = str(tmp_path / "side_effects.log")
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), str(REPO)])
    return env


@contextmanager
def opened(url: str) -> Iterator[ApprovalLedger]:
    provider = SQLModelProvider(url)
    try:
        yield provider.ledger
    finally:
        provider.close()


def shown(env: dict[str, str], proposal_id: str) -> dict[str, Any]:
    done = run_cli("proposals", "show", proposal_id, "--json", env=env)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    found: dict[str, Any] = data.get("proposal", data)
    return found


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_killed_runs_orphan_is_approved_and_resumed_from_the_cli_alone(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if engine == "sqlite" else "postgres_url")
    with ScriptedModel(crm_turn) as model, opened(url) as ledger:
        env = environment(tmp_path, url, model)
        proposal_id = orphan_of_a_killed_run(env, ledger)
        until(lambda: shown(env, proposal_id)["orphaned"], "the proposal to show orphaned")
        approved = run_cli("proposals", "approve", proposal_id, env=env)
        assert approved.returncode == 0, approved.stderr
        assert (
            side_effects(tmp_path) == []
        )  # approving an orphan runs nothing by itself, and says so
        assert "its agent is gone (run-" in approved.stdout
        assert f"run it with: supervisor resume {proposal_id}" in approved.stdout
        resumed = run_cli("resume", proposal_id, env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert f"resumes {proposal_id} (create_customer, approved)" in resumed.stdout
        assert "[resume] completed: Done:" in resumed.stdout
        assert side_effects(tmp_path) == ["create_customer Ada Lovelace ada@example.com"]
        assert ledger.get(proposal_id).status.value == "executed"
        # The model's last request carried the tool's outcome and the run ended with its answer.
        last = model.requests[-1].messages[-1]
        assert last["role"] == "tool" and "cus_ada lovelace" in last["content"]
        resume_rows = [p for p in ledger.list_processes() if p.process_id.startswith("resume-")]
        assert [(p.status, p.exit_code) for p in resume_rows] == [("exited", 0)]
        again = run_cli("resume", proposal_id, env=env)
        assert again.returncode == 2
        assert "resume_refused" in again.stderr and "already executed by agent:run-crm" in (
            " ".join(again.stderr.split())
        )
        assert len(side_effects(tmp_path)) == 1


def test_two_resumers_of_one_orphan_run_it_once_and_the_other_is_told_who(
    tmp_path: Path, sqlite_url: str
) -> None:
    with ScriptedModel(crm_turn) as model, opened(sqlite_url) as ledger:
        env = environment(tmp_path, sqlite_url, model)
        proposal_id = orphan_of_a_killed_run(env, ledger)
        assert run_cli("proposals", "approve", proposal_id, env=env).returncode == 0
        assert SUPERVISOR is not None
        resumers = [
            subprocess.Popen(
                [SUPERVISOR, "resume", proposal_id],
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        outputs = [resumer.communicate(timeout=120) for resumer in resumers]
        codes = sorted(resumer.returncode for resumer in resumers)
        assert codes == [0, 2], outputs
        assert side_effects(tmp_path) == ["create_customer Ada Lovelace ada@example.com"]
        loser = next(err for (out, err), r in zip(outputs, resumers, strict=True) if r.returncode)
        told = " ".join(loser.split())
        assert "being resumed by resume-" in told or "already executed by agent:run-crm" in told


def test_a_factory_off_the_allowlist_is_not_imported_and_the_error_says_how_to_fix_it(
    tmp_path: Path, sqlite_url: str, resume_allowlist: Path
) -> None:
    with ScriptedModel(crm_turn) as model, opened(sqlite_url) as ledger:
        env = environment(tmp_path, sqlite_url, model)
        proposal_id = orphan_of_a_killed_run(env, ledger)
        killed = shown(env, proposal_id)["waiter"]["process_id"]
        # `supervisor run` put its factory on the operator's allowlist; the operator removes it.
        assert resume_allowlist.read_text().splitlines() == [FACTORY]
        removed = run_cli("allowlist", "remove", FACTORY, env=env)
        assert removed.returncode == 0 and "removed from" in removed.stdout
        assert run_cli("proposals", "approve", proposal_id, env=env).returncode == 0
        refused = run_cli("resume", proposal_id, env=env)
        assert refused.returncode == 2
        message = " ".join(refused.stderr.split())
        assert "not_resumable" in message and f"factory '{FACTORY}'" in message
        assert f"supervisor allowlist add {FACTORY}" in message
        assert side_effects(tmp_path) == [] and ledger.get(proposal_id).status.value == "approved"
        # Still visible as waiting on the killed run, orphaned once its 2 s lease has lapsed
        # (the kill may have come right after a renewal: polled, not read once).
        shown_after = until(
            lambda: (found := shown(env, proposal_id))["orphaned"] and found,
            "the killed run's lease to lapse",
            timeout=30,
        )
        assert shown_after["waiter"]["process_id"] == killed
        assert run_cli("allowlist", "add", FACTORY, env=env).returncode == 0
        resumed = run_cli("resume", proposal_id, env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert len(side_effects(tmp_path)) == 1


def test_a_saved_agent_resumes_from_its_tools_references_only_when_they_are_allowed(
    tmp_path: Path, sqlite_url: str
) -> None:
    """A plain SDK script (no factory recorded) that paused and exited."""
    script = (
        "from support.run_factories import CRM_QUERY, crm_agent\n"
        "result = crm_agent().run(CRM_QUERY)\n"
        "print(result.status, result.proposals[0].proposal_id)\n"
    )
    with ScriptedModel(crm_turn) as model:
        env = environment(tmp_path, sqlite_url, model)
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=90
        )
        status, proposal_id = done.stdout.split()
        assert status == "awaiting_approval", done.stderr
        assert run_cli("proposals", "approve", proposal_id, env=env).returncode == 0
        refused = run_cli("resume", proposal_id, env=env)
        message = " ".join(refused.stderr.split())
        assert refused.returncode == 2 and "not_resumable" in message
        assert "support.agents:" in message and "supervisor allowlist add support.agents:" in (
            message
        )
        resumed = run_cli("resume", proposal_id, "--allow", "support.agents:*", env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert side_effects(tmp_path) == ["create_customer Ada Lovelace ada@example.com"]


def test_no_continue_model_records_the_outcome_and_leaves_the_turn(
    tmp_path: Path, sqlite_url: str
) -> None:
    with ScriptedModel(crm_turn) as model, opened(sqlite_url) as ledger:
        env = environment(tmp_path, sqlite_url, model)
        proposal_id = orphan_of_a_killed_run(env, ledger)
        assert run_cli("proposals", "approve", proposal_id, env=env).returncode == 0
        asked = len(model.requests)
        resumed = run_cli("resume", proposal_id, "--no-continue-model", env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert ledger.get(proposal_id).status.value == "executed"
        assert len(model.requests) == asked  # the model was not called
        later = run_cli("resume", proposal_id, env=env)  # continues the turn, runs nothing again
        assert later.returncode == 0, later.stdout + later.stderr
        assert "[resume] completed: Done:" in later.stdout
        assert len(side_effects(tmp_path)) == 1


def test_resume_refuses_a_pending_proposal_and_one_a_live_process_waits_on(
    tmp_path: Path, sqlite_url: str
) -> None:
    with ScriptedModel(crm_turn) as model, opened(sqlite_url) as ledger:
        env = environment(tmp_path, sqlite_url, model)
        proposal_id = orphan_of_a_killed_run(env, ledger)
        pending = run_cli("resume", proposal_id, env=env)
        assert pending.returncode == 2 and "still pending" in pending.stderr
        assert f"supervisor proposals approve {proposal_id}" in " ".join(pending.stderr.split())
        now = datetime.now(UTC)
        ledger.upsert_process(
            ProcessRecord(process_id="run-alive", kind="agent_run", pid=os.getpid(),
                          host="here", command="supervisor run x", status="waiting_for_approval",
                          started_at=now, heartbeat_at=now)
        )  # fmt: skip
        ledger.record_waiters("run-alive", [proposal_id])
        assert run_cli("proposals", "approve", proposal_id, env=env).returncode == 0
        refused = run_cli("resume", proposal_id, env=env)
        assert refused.returncode == 2
        assert "Process run-alive" in refused.stderr and "runs it itself" in refused.stderr
        assert side_effects(tmp_path) == []


def test_a_warm_standby_takes_the_orphan_and_an_unused_one_exits_on_close(
    tmp_path: Path, sqlite_url: str
) -> None:
    from supervisor.services.process_control import ProcessControl

    with ScriptedModel(crm_turn) as model, opened(sqlite_url) as ledger:
        env = environment(tmp_path, sqlite_url, model)
        proposal_id = orphan_of_a_killed_run(env, ledger)
        control = ProcessControl(ledger, sqlite_url, logs=tmp_path / "logs", env=env)
        control.prepare_resume()
        standby = control._standby
        assert standby is not None
        control.prepare_resume()  # one is enough: the same standby stays
        assert control._standby is standby
        assert run_cli("proposals", "approve", proposal_id, env=env).returncode == 0
        started = control.start_resume(proposal_id)
        assert started.process_id == standby.process_id and started.pid == standby.child.pid
        assert control.child(started.process_id).wait(timeout=120) == 0
        assert side_effects(tmp_path) == ["create_customer Ada Lovelace ada@example.com"]
        row = next(p for p in ledger.list_processes() if p.process_id == started.process_id)
        assert row.command == f"supervisor resume {proposal_id} --log {started.log_path}"
        control.prepare_resume()  # a new standby, never used
        unused = control._standby
        assert unused is not None
        control.close()
        assert unused.child.wait(timeout=30) == 0
        assert all(p.process_id != unused.process_id for p in ledger.list_processes())


def test_a_resume_lease_whose_holder_died_is_freed_and_a_live_ones_holder_is_named(
    tmp_path: Path, sqlite_url: str
) -> None:
    import socket

    with ScriptedModel(crm_turn) as model, opened(sqlite_url) as ledger:
        env = environment(tmp_path, sqlite_url, model)
        proposal_id = orphan_of_a_killed_run(env, ledger)
        assert run_cli("proposals", "approve", proposal_id, env=env).returncode == 0
        dead = subprocess.Popen(["true"])
        dead.wait()
        now = datetime.now(UTC)
        for process_id, pid in (("resume-live", os.getpid()), ("resume-dead", dead.pid)):
            ledger.upsert_process(
                ProcessRecord(process_id=process_id, kind="agent_run", pid=pid,
                              host=socket.gethostname(), command="supervisor resume x",
                              status="running", started_at=now, heartbeat_at=now)
            )  # fmt: skip
        ledger.acquire_lease(f"resume:{proposal_id}", "resume-live")
        refused = run_cli("resume", proposal_id, env=env)
        assert refused.returncode == 2
        told = " ".join(refused.stderr.split())
        assert f"being resumed by resume-live (pid {os.getpid()} on {socket.gethostname()})" in told
        assert side_effects(tmp_path) == []
        ledger.release_lease(f"resume:{proposal_id}", "resume-live")
        ledger.acquire_lease(f"resume:{proposal_id}", "resume-dead")  # SIGKILLed mid-resume
        resumed = run_cli("resume", proposal_id, env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert len(side_effects(tmp_path)) == 1
