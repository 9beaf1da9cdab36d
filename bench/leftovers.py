"""Processes a benchmark case leaves behind: the demo's agents and Chromium outlive its terminal
by a moment, and a case started beside them would pay for their shutdown."""

from __future__ import annotations

import time
from pathlib import Path


def live_pids() -> set[int]:
    """Every live process (zombies left out: they use nothing and wait for their parent)."""
    live = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = (entry / "stat").read_text(errors="replace").rsplit(")", 1)[-1].split()[0]
        except OSError:  # gone meanwhile
            continue
        if state != "Z":
            live.add(int(entry.name))
    return live


def wait_gone(before: set[int], limit: float = 15.0) -> None:
    """Wait until the processes started since ``before`` was taken have exited (one started
    by something else meanwhile only makes this wait ``limit`` seconds)."""
    deadline = time.monotonic() + limit
    while live_pids() - before and time.monotonic() < deadline:
        time.sleep(0.05)
