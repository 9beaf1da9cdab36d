"""`supervisor processes list|show|stop`: a real supervised run (its current step, its log),
a real sandbox run's live progress, a stop by id prefix, typed errors; and a step written by a
supervised process lands in its row, last step first."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from support.cli import SUPERVISOR, run_cli
from support.run_factories import CRM_QUERY, crm_turn

from supervisor.ledger.models import ProcessRecord, ProcessStep
from supervisor.ledger.service import ApprovalLedger
from supervisor.runtime.host import SupervisedProcess
from supervisor.runtime.steps import StepWriter
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import ScriptedModel

TESTS_DIR = Path(__file__).resolve().parents[1]


def _until(condition: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _processes(url: str, *flags: str) -> list[dict[str, Any]]:
    done = run_cli("processes", "list", "--json", *flags, "--db", url)
    assert done.returncode == 0, done.stderr
    listed: list[dict[str, Any]] = json.loads(done.stdout)["processes"]
    return listed


def test_a_waiting_run_is_listed_with_its_step_and_log_shown_and_stopped(
    tmp_path: Path, sqlite_url: str
) -> None:
    with SQLModelProvider(sqlite_url) as provider:  # the ledger exists before anyone reads it
        provider.ledger.head()
    log = tmp_path / "run.log"
    with ScriptedModel(crm_turn) as model, log.open("wb") as out:
        env = {**os.environ, **model.env(), "PYTHONPATH": str(TESTS_DIR),
               "SIDE_EFFECT_FILE": str(tmp_path / "fx")}  # fmt: skip
        run = subprocess.Popen(
            [str(SUPERVISOR), "run", "support.run_factories:crm_agent", "--input", CRM_QUERY,
             "--log", str(log), "--db", sqlite_url],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            (listed,) = _until(
                lambda: [p for p in _processes(sqlite_url)
                         if p["state"] == "waiting_for_approval"],
                "the run waiting on its proposal",
            )  # fmt: skip
            assert listed["kind"] == "agent_run" and listed["pid"] == run.pid
            assert listed["doing"].startswith("waiting for approval (create_customer) ")
            assert listed["step"]["kind"] == "waiting_for_approval"
            assert listed["log_path"] == str(log.resolve())
            prefix = listed["process_id"][:8]
            shown = run_cli("processes", "show", prefix, "--db", sqlite_url)
            assert shown.returncode == 0, shown.stderr
            assert f"log              {log.resolve()}" in shown.stdout
            assert "[run] waiting for a decision on " in shown.stdout
            stopped = run_cli("processes", "stop", prefix, "--db", sqlite_url)
            assert stopped.returncode == 0, stopped.stderr
            assert stopped.stdout.startswith(f"stopped {listed['process_id']} with SIGTERM")
            assert run.wait(timeout=30) == 143
        finally:
            if run.poll() is None:
                run.kill()
    assert _processes(sqlite_url) == []
    (ended,) = _processes(sqlite_url, "--all")
    assert ended["state"] == "stopped 143" and ended["doing"] is None
    again = run_cli("processes", "stop", ended["process_id"], "--db", sqlite_url)
    assert "had already ended (exit 143)" in again.stdout


def test_unknown_and_ambiguous_process_ids_are_typed_errors(sqlite_url: str) -> None:
    with SQLModelProvider(sqlite_url) as provider:
        now = datetime.now(UTC)
        for suffix in ("a", "b"):
            provider.ledger.upsert_process(ProcessRecord(
                process_id=f"run-same-{suffix}", kind="agent_run", host="elsewhere",
                status="running", started_at=now, heartbeat_at=now,
            ))  # fmt: skip
    missing = run_cli("processes", "show", "nope", "--db", sqlite_url)
    assert missing.returncode == 2 and "process_not_found" in missing.stderr
    ambiguous = run_cli("processes", "show", "run-same", "--db", sqlite_url)
    assert ambiguous.returncode == 2 and "2 processes start with 'run-same'" in ambiguous.stderr
    elsewhere = run_cli("processes", "stop", "run-same-a", "--db", sqlite_url)
    assert elsewhere.returncode == 2 and "runs on elsewhere; stop it there" in elsewhere.stderr


def test_a_sandbox_run_reports_elapsed_time_and_output_as_it_goes(sqlite_url: str) -> None:
    with SQLModelProvider(sqlite_url) as provider:
        provider.ledger.head()
    script = "for i in 1 2 3 4 5 6; do echo line-$i-0123456789012345678901234567890; sleep 1; done"
    run = subprocess.Popen(
        [str(SUPERVISOR), "sandbox", "exec", "--timeout", "30", "--db", sqlite_url, "--",
         "sh", "-c", script],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    seen: list[int] = []

    def grew() -> bool:
        for process in _processes(sqlite_url):
            step = process["step"]
            if step and step["kind"] == "sandbox_run" and step["output_bytes"] not in seen:
                seen.append(step["output_bytes"])
                assert step["limit_seconds"] == 30
                assert process["doing"].startswith("run ") and "/30s " in process["doing"]
        return len([size for size in seen if size > 0]) >= 2

    try:
        _until(grew, "the output size to grow twice while the run is live", timeout=40)
    finally:
        _, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    assert seen == sorted(seen) and max(seen) > 0


def test_steps_written_by_a_process_land_last_first(sqlite_url: str) -> None:
    with SQLModelProvider(sqlite_url) as provider:
        ledger = provider.ledger
        now = datetime.now(UTC)
        ledger.upsert_process(ProcessRecord(
            process_id="run-steps", kind="agent_run", host="h", status="running",
            started_at=now, heartbeat_at=now,
        ))  # fmt: skip
        writer = StepWriter(ledger, "run-steps", "gpt-test", min_interval=0.05)
        with writer.running():
            writer.on_event("run", None)
            writer.on_event("tool_call", "create_customer\u202e")
            _until(
                lambda: (s := ledger.list_processes()[0].step) and s.kind == "tool_call",
                "the tool step",
            )  # fmt: skip
            writer.on_event("tool_result", "create_customer")
        step = ledger.list_processes()[0].step
        assert step is not None and (step.kind, step.detail) == ("model_call", "gpt-test")
    shown = run_cli("processes", "list", "--db", sqlite_url)
    assert "model gpt-test " in shown.stdout


class _SlowToolSteps:
    """The real ledger, with the step thread's write of a tool step held up for a moment:
    the interleaving a loaded machine makes when the run pauses right after the tool call."""

    def __init__(self, ledger: ApprovalLedger) -> None:
        self.ledger = ledger
        self.tool_step_read = threading.Event()

    def heartbeat(self, process_id: str, **changes: Any) -> ProcessRecord | None:
        step: ProcessStep | None = changes.get("step")
        if step is not None and step.kind == "tool_call":
            self.tool_step_read.set()
            time.sleep(0.3)
        return self.ledger.heartbeat(process_id, **changes)


def test_a_tool_step_written_late_never_overwrites_the_wait_for_approval(sqlite_url: str) -> None:
    with SQLModelProvider(sqlite_url) as provider:
        ledger = provider.ledger
        now = datetime.now(UTC)
        ledger.upsert_process(ProcessRecord(
            process_id="run-race", kind="agent_run", host="h", status="running",
            started_at=now, heartbeat_at=now,
        ))  # fmt: skip
        slow = _SlowToolSteps(ledger)
        process = SupervisedProcess(ledger=slow, process_id="run-race")  # type: ignore[arg-type]
        with process.reporting_steps("gpt-test"):
            assert process.steps is not None
            process.steps.on_event("tool_call", "create_customer")
            assert slow.tool_step_read.wait(timeout=10)
            process.wait_status("create_customer")
            time.sleep(0.5)  # the held-up write has landed (before the wait, never after)
            (row,) = ledger.list_processes()
        assert row.status == "waiting_for_approval"
        assert row.step is not None and row.step.kind == "waiting_for_approval"
