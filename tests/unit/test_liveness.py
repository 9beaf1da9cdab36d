"""Whether an execution's executor is alive: the pid on this host, the process row's lease on
any host, and a pid reused by another process after the executor died."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

from supervisor.ledger.liveness import executor_alive, executor_row, pid_running
from supervisor.ledger.models import Execution, ExecutorIdentity, ProcessRecord

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
CLAIMED = NOW - timedelta(minutes=5)
HERE, THERE = "here", "there"


def execution(pid: int = 4242, host: str = HERE) -> Execution:
    return Execution(
        proposal_id="p1", state="executing",
        executor=ExecutorIdentity(executor_id="agent:a", pid=pid, host=host),
        args_hash="0" * 64, started_at=CLAIMED,
    )  # fmt: skip


def row(
    *,
    pid: int = 4242,
    host: str = HERE,
    status: str = "running",
    started: datetime = CLAIMED - timedelta(minutes=1),
    lease_until: datetime | None = NOW + timedelta(seconds=30),
    heartbeat: datetime = NOW - timedelta(seconds=5),
    lost_at: datetime | None = None,
    process_id: str = "run-1",
) -> ProcessRecord:
    return ProcessRecord(
        process_id=process_id, kind="agent_run", pid=pid, host=host, status=status,
        started_at=started, heartbeat_at=heartbeat, lease_expires_at=lease_until,
        lost_at=lost_at,
    )  # fmt: skip


def alive(rows: list[ProcessRecord], *, pid_up: bool, host: str = HERE) -> bool:
    return executor_alive(
        execution(host=host), rows, NOW, this_host=HERE, running=lambda pid: pid_up
    )


def test_a_local_executor_is_dead_once_its_pid_is_gone() -> None:
    assert alive([], pid_up=False) is False
    assert alive([row()], pid_up=False) is False  # a live lease does not bring a pid back
    assert alive([], pid_up=True) is True


def test_pid_reuse_a_live_pid_whose_process_row_lease_expired_is_dead() -> None:
    expired = row(lease_until=NOW - timedelta(seconds=1), heartbeat=NOW - timedelta(seconds=61))
    assert alive([expired], pid_up=True) is False
    lost = row(status="lost", lease_until=None, lost_at=NOW - timedelta(minutes=1))
    assert alive([lost], pid_up=True) is False
    exited = row(status="exited", lease_until=None, heartbeat=NOW - timedelta(minutes=1))
    assert alive([exited], pid_up=True) is False


def test_a_row_of_an_earlier_process_with_the_same_pid_is_not_the_executor() -> None:
    earlier = row(
        status="exited", lease_until=None, started=CLAIMED - timedelta(hours=2),
        heartbeat=CLAIMED - timedelta(hours=1),
    )  # fmt: skip
    later = row(started=CLAIMED + timedelta(minutes=1), status="exited", lease_until=None)
    assert executor_row(execution(), [earlier, later]) is None
    assert alive([earlier, later], pid_up=True) is True
    assert alive([earlier], pid_up=False) is False


def test_rows_of_another_host_or_pid_do_not_count() -> None:
    expired = row(lease_until=NOW - timedelta(seconds=1))
    elsewhere = expired.model_copy(update={"host": THERE})
    other_pid = expired.model_copy(update={"pid": 1})
    assert alive([elsewhere, other_pid], pid_up=True) is True


def test_on_another_host_only_the_process_row_can_tell() -> None:
    assert alive([], pid_up=False, host=THERE) is True  # no row: assumed alive
    live = row(host=THERE)
    assert alive([live], pid_up=False, host=THERE) is True  # never asks this host's pids
    expired = row(host=THERE, lease_until=NOW - timedelta(seconds=1))
    assert alive([expired], pid_up=True, host=THERE) is False
    exited = row(host=THERE, status="exited", lease_until=None)
    assert alive([exited], pid_up=True, host=THERE) is False


@pytest.mark.parametrize("pid", [os.getpid(), 1])
def test_pid_running_sees_live_processes(pid: int) -> None:
    assert pid_running(pid) is True  # pid 1 exists but may not be ours to signal


def test_pid_running_sees_a_reaped_child_gone() -> None:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert pid_running(child.pid) is False
