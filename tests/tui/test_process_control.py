"""Pilot tests of process control with real ``supervisor run`` subprocesses on a real ledger.

The runs use ``support.run_factories`` against a scripted model served from this process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.run_factories import CRM_QUERY, crm_turn
from tui_helpers import record_notifications, wait_for

from screens.app import make_app
from screens.confirm_dialog import ConfirmDialog
from screens.log_screen import LogScreen
from screens.main_screen import MainScreen
from screens.run_dialog import RunDialog
from screens.widgets.processes.processes_pane import ProcessesPane
from supervisor.ledger.models import ApproverContext, ProcessRecord, ProposalStatus
from supervisor.services.identity import ApproverIdentity
from supervisor.services.process_control import ProcessControl, log_path_of
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import ScriptedModel

SIZE = (150, 45)
TESTS = Path(__file__).resolve().parent.parent


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel(crm_turn) as running:
        yield running


@pytest.fixture
def control(provider: SQLModelProvider, model: ScriptedModel, tmp_path: Path) -> ProcessControl:
    env = {
        **model.env(),
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        "SIDE_EFFECT_FILE": str(tmp_path / "side_effects.log"),
    }
    return ProcessControl(provider.ledger, provider.url, logs=tmp_path / "logs", env=env)


def _process(provider: SQLModelProvider, process_id: str) -> ProcessRecord | None:
    return next((p for p in provider.ledger.list_processes() if p.process_id == process_id), None)


async def test_start_follow_and_finish_a_run_after_an_approval(
    provider: SQLModelProvider,
    control: ProcessControl,
    settings: SupervisorSettings,
    identity: ApproverIdentity,
) -> None:
    app = make_app(settings, ledger=provider.ledger, identity=identity, process_control=control)
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, MainScreen)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, RunDialog))
        await pilot.press(*"support.run_factories:crm_builder", "enter")
        await pilot.press(*CRM_QUERY, "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, LogScreen), 10)
        log_screen = app.screen
        assert isinstance(log_screen, LogScreen)
        process_id = log_screen.process_id
        await wait_for(pilot, lambda: "waiting for a decision" in log_screen.text, 30)
        record = _process(provider, process_id)
        assert record is not None and record.status == "waiting_for_approval"
        assert record.kind == "agent_run" and log_path_of(record) == log_screen.log_path
        proposal = provider.ledger.list(status="pending").items[0]
        provider.ledger.approve(
            proposal.proposal_id, "ops@host", "ok", context=ApproverContext.current(via="cli"),
            via="cli",
        )  # fmt: skip
        await wait_for(pilot, lambda: "[run] completed" in log_screen.text, 30)
        assert "cus_" in log_screen.text
        assert provider.ledger.get(proposal.proposal_id).status is ProposalStatus.EXECUTED
        await wait_for(pilot, lambda: (_process(provider, process_id) or record).status == "exited")
        finished = _process(provider, process_id)
        assert finished is not None and finished.exit_code == 0
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_stop_a_waiting_run_from_the_processes_pane(
    provider: SQLModelProvider,
    control: ProcessControl,
    settings: SupervisorSettings,
    identity: ApproverIdentity,
) -> None:
    started = control.start_run("support.run_factories:crm_agent", CRM_QUERY)
    app = make_app(settings, ledger=provider.ledger, identity=identity, process_control=control)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        pane = screen.query_one(ProcessesPane)

        def waiting_row() -> int | None:
            for index, row in enumerate(pane.process_rows):
                if (
                    row.key == f"process:{started.process_id}"
                    and row.state == "waiting_for_approval"
                ):
                    return index
            return None

        await wait_for(pilot, lambda: waiting_row() is not None, 30)
        await pilot.press("p")
        pane.move_cursor(row=waiting_row() or 0)
        await pilot.pause()
        assert screen.selected_process_id() == started.process_id
        await pilot.press("k")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await wait_for(pilot, lambda: any("stopped" in note for note in notes), 20)
        record = _process(provider, started.process_id)
        assert record is not None and record.status == "stopped"
        assert record.exit_code == 143  # the run caught SIGTERM and recorded itself
        await wait_for(pilot, lambda: not os.path.exists(f"/proc/{started.pid}"), 10)
        assert "[run] stopped by SIGTERM" in started.log_path.read_text()


def test_stop_escalates_to_sigkill_when_sigterm_is_ignored(
    provider: SQLModelProvider, tmp_path: Path
) -> None:
    import signal
    import socket
    import subprocess
    import sys
    from datetime import UTC, datetime

    ignores_sigterm = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", ignores_sigterm], stdout=subprocess.PIPE, start_new_session=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == b"up"
    now = datetime.now(UTC)
    provider.ledger.upsert_process(
        ProcessRecord(
            process_id="stubborn", kind="agent_run", pid=child.pid, host=socket.gethostname(),
            command="stubborn", status="running", started_at=now, heartbeat_at=now,
        )
    )  # fmt: skip
    control = ProcessControl(provider.ledger, provider.url, logs=tmp_path)
    try:
        report = control.stop("stubborn", grace=0.5)
        assert report.signal_name == "SIGKILL"
        child.wait(timeout=5)
        record = _process(provider, "stubborn")
        assert record is not None and record.status == "stopped"
        assert record.exit_code == 137
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
