"""Stopping a bubblewrap run's whole process tree, race-free, from any process on the host.

SIGTERM cannot stop a pid-namespace init from outside (signals without a handler are ignored by
an init), and bwrap's ``--die-with-parent`` is armed only after the namespace exists. So a run
is stopped by freezing the outer bwrap (it can no longer create a namespace), asking every
sandboxed process to exit (SIGTERM), then SIGKILLing each namespace init, which takes the whole
namespace with it, and finally the outer bwrap's process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            parents[int(entry.name)] = int(fields[1])
    return parents


def children(pid: int, parents: dict[int, int] | None = None) -> list[int]:
    """Direct children of ``pid``."""
    table = _parents() if parents is None else parents
    return [child for child, parent in table.items() if parent == pid]


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` (breadth first)."""
    table = _parents()
    found: list[int] = []
    queue = [pid]
    while queue:
        current = queue.pop(0)
        for child in children(current, table):
            found.append(child)
            queue.append(child)
    return found


def alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def terminate_run(leader: int, grace: float) -> None:
    """Stop the run whose outer bwrap is ``leader`` (also its process group id).

    Args:
        leader: Pid of the outer bwrap process.
        grace: Seconds the sandboxed processes get after SIGTERM before everything is killed.
    """
    _signal(leader, signal.SIGSTOP)
    inits = children(leader)
    if grace > 0:
        workers = [pid for init in inits for pid in descendants(init)]
        for pid in workers:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(alive(pid) for pid in workers):
            time.sleep(0.02)
    for init in inits:
        _signal(init, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, signal.SIGKILL)
    _signal(leader, signal.SIGKILL)
