"""Is the process that claimed an execution still alive? Judged the same way on every host.

An ``executing`` row names its executor's pid and host (``ExecutorIdentity``). On this host the
pid answers for itself (``os.kill(pid, 0)``), but a pid is reused once its process is gone, so
a live pid proves nothing when the executor's own process row says it is gone. The executor's
row is the process row with its pid and host that was live when the call was claimed (started
no later than the claim, not ended before it); when that row's lease ran out or it ended, the
executor is dead whatever holds the pid now. On another host only that row can tell: an
executor there without a process row is assumed alive, since nothing says otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from supervisor.ledger.models import (
    LIVE_PROCESS_STATUSES,
    LOST_AFTER_SECONDS,
    Execution,
    ProcessRecord,
)

PidRunning = Callable[[int], bool]


def pid_running(pid: int) -> bool:
    """Whether a process with ``pid`` exists on this host (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ended_at(process: ProcessRecord) -> datetime:
    """The last moment ``process`` is known to have been alive: its lease deadline while live,
    when it was declared lost, or its last write (the final status) once it ended."""
    if process.status in LIVE_PROCESS_STATUSES:
        return process.lease_expires_at or process.heartbeat_at + timedelta(
            seconds=LOST_AFTER_SECONDS
        )
    if process.status == "lost" and process.lost_at is not None:
        return process.lost_at
    return process.heartbeat_at


def executor_row(execution: Execution, processes: Iterable[ProcessRecord]) -> ProcessRecord | None:
    """The process row of the executor of ``execution``, if it had one.

    Of the rows with the executor's pid and host, those live at the claim (started no later,
    not ended before it); the newest of them. A row that ended before the claim belongs to an
    earlier process that had the same pid.
    """
    identity, claimed_at = execution.executor, execution.started_at
    candidates = [
        process
        for process in processes
        if process.pid == identity.pid
        and process.host == identity.host
        and process.started_at <= claimed_at <= _ended_at(process)
    ]
    return max(candidates, key=lambda process: process.started_at, default=None)


def executor_alive(
    execution: Execution,
    processes: Iterable[ProcessRecord],
    now: datetime,
    *,
    this_host: str,
    running: PidRunning = pid_running,
) -> bool:
    """Whether the executor of ``execution`` may still be running it.

    Args:
        execution: An ``executing`` execution.
        processes: Process rows (at least those with the executor's pid).
        now: The ledger's time, against which lease deadlines are read.
        this_host: This host's name (``socket.gethostname()``).
        running: Whether a pid exists on this host (:func:`pid_running`).

    Returns:
        False when the executor's process row is no longer alive (lease past its deadline,
        lost, or ended), or when it ran on this host and its pid is gone; True otherwise.
    """
    row = executor_row(execution, processes)
    if row is not None and not row.alive_at(now):
        return False
    if execution.executor.host == this_host:
        return running(execution.executor.pid)
    return True
