"""Liveness and turn leases with real processes killed by SIGKILL, on SQLite and PostgreSQL.

- A ``supervisor run`` agent waiting on a proposal is SIGKILLed: after its lease deadline the
  process shows ``lost`` and the proposal ``orphaned`` (CLI, JSON, inbox service).
- A run that exits cleanly releases its lease at once: its proposal is orphaned immediately.
- Two processes continue one paused turn: the model is called once; when the holder of the
  turn is SIGKILLed mid-call, the other takes the turn over after the lease deadline.

The lease is shortened with SUPERVISOR_LEASE_SECONDS; the tests wait on conditions, never on
durations.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.cli import SUPERVISOR, run_cli
from support.orphans import until
from support.run_factories import CRM_QUERY, crm_turn

from supervisor import SQLModelProvider
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.approvals import ApprovalsService
from supervisor.services.identity import ApproverIdentity
from supervisor.services.processes import ProcessesService
from supervisor.testing import CallTools, Delay, Reply, ScriptedModel, ToolCall, Turn

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO = TESTS_DIR.parent
ADA = {"name": "Ada", "email": "ada@example.com"}


def environment(tmp_path: Path, url: str, model: ScriptedModel, lease: float) -> dict[str, str]:
    env = dict(os.environ)
    env.update(model.env())
    env["SUPERVISOR_DB"] = url
    env["SUPERVISOR_LEASE_SECONDS"] = str(lease)
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


def listed(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    done = run_cli("proposals", "list", "--all", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return {item["proposal_id"]: item for item in json.loads(done.stdout)["items"]}


def start_run(env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    assert SUPERVISOR is not None
    return subprocess.Popen(
        [SUPERVISOR, "run", "support.run_factories:crm_agent", "--input", CRM_QUERY, *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def waiting_proposal(ledger: ApprovalLedger) -> str | None:
    pending = ledger.list(status="pending").items
    processes = ledger.list_processes()
    if pending and processes and processes[0].status == "waiting_for_approval":
        if ledger.waiter_alive(pending[0].proposal_id):
            return pending[0].proposal_id
    return None


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_sigkilled_waiting_run_is_lost_and_its_proposal_orphaned(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if engine == "sqlite" else "postgres_url")
    with ScriptedModel(crm_turn) as model, opened(url) as ledger:
        env = environment(tmp_path, url, model, lease=2)
        run = start_run(env)
        try:
            proposal_id = until(lambda: waiting_proposal(ledger), "the run to wait")
            before = listed(env)[proposal_id]
            assert before["orphaned"] is False and before["waiter"]["alive"] is True
            run.send_signal(signal.SIGKILL)
            run.wait(timeout=30)
        finally:
            if run.poll() is None:
                run.kill()
        service = ProcessesService(ledger)
        lost = until(
            lambda: [r for r in service.refresh() if r.state.startswith("lost since ")],
            "the killed run to show lost",
        )
        assert [row.kind for row in lost] == ["agent_run"] and lost[0].lost_at is not None
        after = listed(env)[proposal_id]
        assert after["orphaned"] is True
        assert after["waiter"]["alive"] is False and after["waiter"]["process_status"] == "lost"
        text = run_cli("proposals", "list", env=env)
        assert text.returncode == 0 and "orphaned" in text.stdout
        shown = run_cli("proposals", "show", proposal_id, env=env)
        assert "orphaned" in shown.stdout and "gone (lost) since" in shown.stdout
        inbox = ApprovalsService(ledger, ApproverIdentity.current("tui"))
        inbox.load()
        change = inbox.refresh_orphans()
        assert change is not None and change.orphaned == frozenset({proposal_id})
        assert set(inbox.orphans()) == {proposal_id}
        panel = ProcessesService(ledger, pending=inbox.pending)
        assert [row.state for row in panel.refresh() if row.kind == "agent"] == [
            "orphaned (waiting process gone)"
        ]


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_clean_exit_releases_the_lease_at_once(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if engine == "sqlite" else "postgres_url")
    with ScriptedModel(crm_turn) as model, opened(url) as ledger:
        env = environment(tmp_path, url, model, lease=600)  # never runs out during the test
        run = start_run(env, "--decision-timeout", "0.5")
        out, err = run.communicate(timeout=120)
        assert run.returncode == 1, out + err  # left waiting: exits by itself
        [proposal] = ledger.list(status="pending").items
        [process] = ledger.list_processes()
        assert process.status == "exited" and process.lease_expires_at is None
        assert ledger.waiter_alive(proposal.proposal_id) is False
        item = listed(env)[proposal.proposal_id]
        assert item["orphaned"] is True and item["waiter"]["process_status"] == "exited"
        rows = ProcessesService(ledger).refresh()
        assert [row.state for row in rows if row.kind == "agent_run"] == ["exited 1"]


def paused_and_rejected(env: dict[str, str], url: str) -> str:
    """Pause the ops agent on one call and reject it: every resume may continue the turn."""
    done = subprocess.run(
        [sys.executable, "-m", "support.runtime_proc", "pause", "Create Ada"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (proposal_id,) = json.loads(done.stdout.strip().splitlines()[-1])
    with opened(url) as ledger:
        ledger.reject(proposal_id, "operator@example.com", "not today")
    return str(proposal_id)


def resumer(env: dict[str, str], proposal_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "support.turn_proc", "resume", proposal_id],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def finished(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_two_processes_continuing_one_turn_call_the_model_once(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if engine == "sqlite" else "postgres_url")
    script: list[Turn] = [
        CallTools([ToolCall("create_customer", ADA)]),
        Delay(6, Reply("Ada was not created: the call was rejected.")),
        Reply("A second continuation of the same turn."),
    ]
    with ScriptedModel(script) as model:
        env = environment(tmp_path, url, model, lease=5)
        proposal_id = paused_and_rejected(env, url)
        first = resumer(env, proposal_id)
        until(lambda: len(model.requests) == 2, "the first resumer to call the model")
        second = resumer(env, proposal_id)  # while the first one's model call is in flight
        first_result, second_result = finished(first), finished(second)
        assert len(model.requests) == 2  # the pause, then one continuation: never two
    assert first_result["assistant_response"] == "Ada was not created: the call was rejected."
    assert first_result["error_code"] == "denied"
    assert second_result["assistant_response"] is None
    holder = second_result["turn_holder"]  # set when it saw the lease held as it gave way
    assert holder is None or holder.startswith(f"pid {first.pid}@")
    assert not (tmp_path / "side_effects.log").exists()  # a rejected call never ran


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_dead_holders_turn_is_taken_over_after_its_deadline(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if engine == "sqlite" else "postgres_url")
    script: list[Turn] = [
        CallTools([ToolCall("create_customer", ADA)]),
        Delay(600, Reply("The holder never gets this answer.")),
        Reply("Taken over: Ada was not created."),
    ]
    with ScriptedModel(script) as model:
        env = environment(tmp_path, url, model, lease=2)
        proposal_id = paused_and_rejected(env, url)
        holder = resumer(env, proposal_id)
        try:
            until(lambda: len(model.requests) == 2, "the holder to call the model")
            with opened(url) as ledger:
                leases = [ledger.get_lease(f"turn:{p.checkpoint_id}")
                          for p in ledger.list(status=None).items]  # fmt: skip
            assert [lease.holder.startswith(f"pid {holder.pid}@") for lease in leases if lease]
            holder.send_signal(signal.SIGKILL)
            holder.wait(timeout=30)
        finally:
            if holder.poll() is None:
                holder.kill()
        taker = finished(resumer(env, proposal_id))
        assert len(model.requests) == 3
    assert taker["assistant_response"] == "Taken over: Ada was not created."
    assert taker["turn_holder"] is None
