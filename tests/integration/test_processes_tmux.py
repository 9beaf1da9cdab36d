"""In a real terminal: select the second of three runs, let the pane refresh while a newer run
appears above it, press ``k``: the confirmation names that run and its pid, and ``y`` stops that
run and no other.

The runs are real processes (``sleep`` in their own process group) registered in a real SQLite
ledger, kept alive by a heartbeat thread as ``supervisor run`` would; tmux runs on its own
socket with a fixed size and ``capture-pane`` reads the screen.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.tmux import Tmux, tmux_server

from supervisor.ledger.models import ProcessRecord
from supervisor.store.provider import SQLModelProvider

pytestmark = pytest.mark.slow

WAIT_S = 30.0


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    with tmux_server(
        "supervisor-processes", session="tui", shown_while_open="Agents and processes"
    ) as session:
        yield session


class Runs:
    """Real processes registered as runs, heartbeating until stopped or the test ends."""

    def __init__(self, provider: SQLModelProvider) -> None:
        self.provider = provider
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeats, daemon=True)

    def add(self, process_id: str, started: datetime) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        threading.Thread(target=child.wait, daemon=True).start()  # reaped: no zombie
        self.children[process_id] = child
        now = datetime.now(UTC)
        command = (
            f"supervisor run support.run_factories:crm_agent --input 'a long request for "
            f"{process_id} that does not fit its column' --process-id {process_id}"
        )
        self.provider.ledger.upsert_process(
            ProcessRecord(
                process_id=process_id, kind="agent_run", pid=child.pid,
                host=socket.gethostname(), command=command, status="running",
                started_at=started, heartbeat_at=now,
            )
        )  # fmt: skip
        return child

    def status(self, process_id: str) -> str:
        rows = self.provider.ledger.list_processes()
        return next(row.status for row in rows if row.process_id == process_id)

    def _heartbeats(self) -> None:
        while not self._stop.wait(1.0):
            for process_id in list(self.children):
                if self.status(process_id) == "running":
                    self.provider.ledger.heartbeat(process_id)

    def __enter__(self) -> Runs:
        self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._beat.join(timeout=5)
        for child in self.children.values():
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)


def test_the_second_run_selected_through_refreshes_is_the_one_stopped(
    tmux: Tmux, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    base = datetime.now(UTC) - timedelta(minutes=5)
    with SQLModelProvider(url) as provider, Runs(provider) as runs:
        for index in range(3):
            runs.add(f"run-{index}", base + timedelta(seconds=index))
        tmux.start_supervisor(f"--db {url}", width=120, height=40)
        tmux.wait_for(
            lambda screen: "run-2" in screen or "supervisor run" in screen, WAIT_S, "runs"
        )
        time.sleep(1.0)
        tmux.keys("p")
        time.sleep(0.3)
        tmux.keys("Down")  # rows are newest first: run-2, run-1, run-0
        tmux.wait_for(lambda screen: "run-1  pid" in screen, WAIT_S, "run-1 selected")
        runs.add("run-3", datetime.now(UTC))  # listed first from the next refresh on
        pid_3 = str(runs.children["run-3"].pid)
        tmux.wait_for(lambda screen: pid_3 in screen, WAIT_S, "the newer run")
        time.sleep(2.5)  # more refreshes
        tmux.wait_for(lambda screen: "run-1  pid" in screen, WAIT_S, "run-1 still selected")

        tmux.keys("k")
        pid_1 = runs.children["run-1"].pid
        dialog = tmux.wait_for(lambda s: "SIGTERM to its process group" in s, WAIT_S, "dialog")
        assert f"Stop run-1 (pid {pid_1} on" in dialog
        assert "y Stop" in dialog and "n/Esc Back" in dialog
        tmux.keys("y")
        deadline = time.monotonic() + WAIT_S
        while runs.status("run-1") != "stopped" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert runs.status("run-1") == "stopped"
        assert runs.children["run-1"].wait(timeout=WAIT_S) is not None
        tmux.wait_for(lambda screen: "stopped 143" in screen, WAIT_S, "the stopped row")
        for process_id, child in runs.children.items():
            if process_id != "run-1":
                assert child.poll() is None, process_id
                assert runs.status(process_id) == "running", process_id
