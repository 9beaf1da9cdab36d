"""What a killed ``supervisor sandbox exec`` leaves behind, and who cleans it up.

Real CLI processes under real bubblewrap on a real SQLite ledger: one is SIGKILLed mid-run, a
second keeps running, then the next run (or ``supervisor doctor``) must mark the dead one's row
``lost`` and remove its work directory while leaving the live run alone.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlmodel import SQLModel
from support.cli import SUPERVISOR
from support.required import require_bwrap

from sandboxes.cgroup import pids_parent
from supervisor.ledger.models import LOST_AFTER_SECONDS, ProcessRecord
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.engine import create_ledger_engine
from supervisor.store.provider import SQLModelProvider

PREFIX = "supervisor-sandbox-"


@pytest.fixture(autouse=True)
def _require_bwrap() -> None:
    require_bwrap()


@pytest.fixture
def base_dir() -> Iterator[Path]:
    """The runs' TMPDIR; searchable by others since bwrap runs as nobody under root."""
    folder = Path(tempfile.mkdtemp(prefix="stale-runs-"))
    folder.chmod(0o711)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def ledger(sqlite_url: str) -> Iterator[ApprovalLedger]:
    provider = SQLModelProvider(sqlite_url)
    try:
        yield provider.ledger
    finally:
        provider.close()


def cli(*args: str) -> list[str]:
    assert SUPERVISOR is not None
    return [SUPERVISOR, *args]


def env_for(base_dir: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(base_dir)}


def start_run(sqlite_url: str, base_dir: Path, ledger: ApprovalLedger) -> tuple[
    subprocess.Popen[bytes], ProcessRecord, Path
]:  # fmt: skip
    """Start `supervisor sandbox exec -- sleep 300`; wait until its row runs and its dir exists."""
    rows_before = {record.process_id for record in ledger.list_processes()}
    dirs_before = set(base_dir.iterdir())
    process = subprocess.Popen(
        cli("sandbox", "exec", "--db", sqlite_url, "--timeout", "300", "--",
                   "sleep", "300"),
        env=env_for(base_dir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    for _ in range(1200):  # waits for the run, up to a minute on a loaded machine
        new_rows = [record for record in ledger.list_processes(status="running")
                    if record.process_id not in rows_before]  # fmt: skip
        new_dirs = [path for path in base_dir.iterdir()
                    if path not in dirs_before and path.name.startswith(PREFIX)]  # fmt: skip
        if new_rows and new_dirs:
            assert len(new_rows) == 1 and len(new_dirs) == 1
            return process, new_rows[0], new_dirs[0]
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        time.sleep(0.05)
    process.kill()
    pytest.fail("the sandbox run never reached running")


def age_heartbeat(sqlite_url: str, process_id: str) -> None:
    """Move a row's last heartbeat and its lease deadline into the past, as the passing of
    60 s would."""
    engine = create_ledger_engine(sqlite_url)
    table = SQLModel.metadata.tables["process"]
    old = datetime.now(UTC) - timedelta(seconds=LOST_AFTER_SECONDS + 5)
    with engine.begin() as connection:
        connection.execute(sa.update(table).where(table.c.id == process_id)
                           .values(heartbeat_at=old, lease_expires_at=old))  # fmt: skip
    engine.dispose()


def cgroup_of(ledger: ApprovalLedger, process_id: str) -> Path | None:
    """The run's per-run pids cgroup, where this host gives runs one."""
    parent = pids_parent()
    if parent is None:
        return None
    [started] = [event for event in ledger.trace_events(kind="sandbox.started")
                 if event.payload.get("process_id") == process_id]  # fmt: skip
    assert started.payload["cgroup_pids"] is True
    return parent / f"supervisor-sandbox-{started.run_id}"


def status_of(ledger: ApprovalLedger, process_id: str) -> str:
    return next(r.status for r in ledger.list_processes() if r.process_id == process_id)


@pytest.mark.parametrize("next_step", ["exec", "doctor"])
def test_a_sigkilled_run_is_marked_lost_and_its_directory_removed_by_the_next_step(
    sqlite_url: str, base_dir: Path, ledger: ApprovalLedger, next_step: str
) -> None:
    victim, victim_row, victim_dir = start_run(sqlite_url, base_dir, ledger)
    live, live_row, live_dir = start_run(sqlite_url, base_dir, ledger)
    try:
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        # What SIGKILL leaves: a row that still says running, a directory on disk.
        assert status_of(ledger, victim_row.process_id) == "running"
        assert victim_dir.exists()
        victim_cgroup = cgroup_of(ledger, victim_row.process_id)
        assert victim_cgroup is None or victim_cgroup.is_dir()
        age_heartbeat(sqlite_url, victim_row.process_id)

        if next_step == "exec":
            step = subprocess.run(
                cli("sandbox", "exec", "--db", sqlite_url, "--", "true"),
                env=env_for(base_dir), capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert step.returncode == 0, step.stderr
        else:
            step = subprocess.run(cli("doctor", "--db", sqlite_url),
                                  env=env_for(base_dir), capture_output=True, text=True,
                                  timeout=120)  # fmt: skip
            assert step.returncode == 0, step.stdout + step.stderr
            assert "marked 1 lost" in step.stdout
            assert "removed 1 left by dead runs" in step.stdout

        assert status_of(ledger, victim_row.process_id) == "lost"
        assert not victim_dir.exists()
        assert victim_cgroup is None or not victim_cgroup.exists()  # its pids cgroup went too
        # The concurrent run is untouched: still running, its directory still there.
        assert live.poll() is None
        assert status_of(ledger, live_row.process_id) == "running"
        assert live_dir.exists()
    finally:
        live.send_signal(signal.SIGTERM)
        code = live.wait(timeout=60)
        if victim.poll() is None:
            victim.kill()
    # SIGTERM is not SIGKILL: the run records how it ended and deletes its own directory.
    assert code == 128 + signal.SIGTERM
    assert status_of(ledger, live_row.process_id) == "failed"
    assert not live_dir.exists()


def test_a_directory_without_a_dead_owner_is_left_alone(sqlite_url: str, base_dir: Path) -> None:
    foreign = base_dir / f"{PREFIX}not-ours"
    (foreign / "work").mkdir(parents=True)
    (foreign / "owner.json").write_text('{"format": 1, "pid": 1}')  # not a marker we wrote
    unmarked = base_dir / f"{PREFIX}unmarked"
    unmarked.mkdir()
    step = subprocess.run(cli("doctor", "--db", sqlite_url),
                          env=env_for(base_dir), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert step.returncode == 0, step.stdout + step.stderr
    assert "none left by dead runs" in step.stdout
    assert foreign.exists() and unmarked.exists()
