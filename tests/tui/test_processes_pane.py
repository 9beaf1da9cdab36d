"""The processes pane keeps its selection by process id and stops only what was confirmed.

Real processes (``sleep`` in their own process group) are registered in a real SQLite ledger;
the pane is refreshed by the running processes service while new runs appear above the
selected one, as they do when a run is started (the newest run is listed first).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from tui_helpers import drawn_text, main_screen, wait_for

from screens.app import make_app
from screens.confirm_dialog import ConfirmDialog
from screens.widgets.processes.processes_pane import ProcessesPane, shorten
from supervisor.ledger.models import ProcessRecord
from supervisor.services.identity import ApproverIdentity
from supervisor.services.process_control import ProcessControl
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (120, 40)
LONG_COMMAND = (
    "supervisor run support.run_factories:crm_agent --input " + "x" * 200 + " --log /tmp/END"
)


class Sleepers:
    """Real processes to list and stop, reaped as they end (no zombies look alive)."""

    def __init__(self) -> None:
        self.children: list[subprocess.Popen[bytes]] = []

    def spawn(self) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(["sleep", "120"], start_new_session=True)
        threading.Thread(target=child.wait, daemon=True).start()
        self.children.append(child)
        return child

    def close(self) -> None:
        for child in self.children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)


@pytest.fixture
def sleepers() -> Iterator[Sleepers]:
    running = Sleepers()
    try:
        yield running
    finally:
        running.close()


def register(
    provider: SQLModelProvider, process_id: str, pid: int, started: datetime, command: str
) -> None:
    now = datetime.now(UTC)
    provider.ledger.upsert_process(
        ProcessRecord(
            process_id=process_id, kind="agent_run", pid=pid, host=socket.gethostname(),
            command=command, status="running", started_at=started, heartbeat_at=now,
        )
    )  # fmt: skip


def dialog_text(app: object) -> str:
    """What the open dialog's question and key line draw."""
    screen = getattr(app, "screen")  # noqa: B009 - the dialog on top
    return "\n".join(drawn_text(w) for w in screen.query(".dialog-question, .dialog-keys"))


def listed(pane: ProcessesPane, key: str) -> Callable[[], bool]:
    """True once the pane lists the row ``key``."""
    return lambda: key in [row.key for row in pane.process_rows]


def status_of(provider: SQLModelProvider, process_id: str) -> str:
    return next(p.status for p in provider.ledger.list_processes() if p.process_id == process_id)


async def test_selection_follows_the_process_through_refreshes_and_stop_is_confirmed(
    provider: SQLModelProvider,
    settings: SupervisorSettings,
    identity: ApproverIdentity,
    sleepers: Sleepers,
    tmp_path: object,
) -> None:
    base = datetime.now(UTC) - timedelta(minutes=5)
    runs = {}
    for index in range(3):
        child = sleepers.spawn()
        runs[f"run-{index}"] = child
        register(
            provider, f"run-{index}", child.pid, base + timedelta(seconds=index), f"run {index}"
        )
    control = ProcessControl(provider.ledger, provider.url)
    app = make_app(settings, ledger=provider.ledger, identity=identity, process_control=control)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        pane = screen.query_one(ProcessesPane)
        await wait_for(pilot, lambda: len(pane.process_rows) == 3)
        assert [row.key for row in pane.process_rows] == [
            "process:run-2", "process:run-1", "process:run-0",
        ]  # fmt: skip
        await pilot.press("p", "down")
        assert screen.selected_process_id() == "run-1"
        # Two newer runs appear above it, one per refresh; the cursor stays on run-1.
        for extra in ("run-3", "run-4"):
            child = sleepers.spawn()
            runs[extra] = child
            register(provider, extra, child.pid, datetime.now(UTC), f"run {extra}")
            await wait_for(pilot, listed(pane, f"process:{extra}"))
        await pilot.pause(1.2)  # one more refresh with nothing new
        assert screen.selected_process_id() == "run-1"
        assert pane.process_rows[pane.cursor_row].key == "process:run-1"
        assert pane.cursor_row == 3
        assert "run-1" in drawn_text(screen.query_one("#process-detail"))

        # k asks first, naming the run and its pid; "n" stops nothing.
        await pilot.press("k")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.pause(0.1)
        question = dialog_text(app)
        assert "run-1" in question and f"pid {runs['run-1'].pid}" in question
        assert "y Stop" in question and "n/Esc Back" in question
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.pause(0.3)
        assert all(child.poll() is None for child in runs.values())
        assert status_of(provider, "run-1") == "running"

        # "y" stops exactly the run that was named.
        await pilot.press("k")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.pause(0.1)
        assert "run-1" in dialog_text(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: status_of(provider, "run-1") == "stopped", 10)
        await wait_for(pilot, lambda: runs["run-1"].poll() is not None, 10)
        # The row says how it ended, as recorded (SIGTERM: 128 + 15).
        await wait_for(
            pilot,
            lambda: pane.selected_row is not None and pane.selected_row.state == "stopped 143",
            10,
        )
        others = [child for name, child in runs.items() if name != "run-1"]
        assert all(child.poll() is None for child in others)
        assert all(status_of(provider, name) == "running" for name in runs if name != "run-1")


async def test_pid_and_state_are_never_cut_and_the_detail_line_has_the_full_command(
    provider: SQLModelProvider,
    settings: SupervisorSettings,
    identity: ApproverIdentity,
    sleepers: Sleepers,
) -> None:
    child = sleepers.spawn()
    register(provider, "run-long", child.pid, datetime.now(UTC), LONG_COMMAND)
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=(150, 40)) as pilot:
        screen = main_screen(app)
        pane = screen.query_one(ProcessesPane)
        await wait_for(pilot, lambda: len(pane.process_rows) == 1)
        # Column widths are fitted once the row's values are laid out, not at the first frame
        # (a pid of 3 digits fits the header's width before that: wait for the state too).
        await wait_for(
            pilot, lambda: str(child.pid) in drawn_text(pane) and "running" in drawn_text(pane)
        )
        table = drawn_text(pane)
        assert str(child.pid) in table and "running" in table
        assert "supervisor run support" in table and "…" in table
        assert "/tmp/END" not in table  # the command was shortened to fit
        assert max(len(line) for line in table.splitlines()) <= pane.size.width
        detail = screen.query_one("#process-detail")
        # The detail line holds the whole command; widen it to read the end.
        detail.styles.width = len(LONG_COMMAND) + 80
        await pilot.pause(0.1)
        assert "/tmp/END" in drawn_text(detail) and f"pid {child.pid}" in drawn_text(detail)


def test_shorten_keeps_short_text_and_marks_a_cut() -> None:
    assert shorten("abc", 5) == "abc"
    assert shorten("abcdef", 4) == "abc…"
