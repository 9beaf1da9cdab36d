"""A cgroup ``pids`` limit for one sandbox run, where this host lets us create one.

RLIMIT_NPROC already caps the sandbox user's processes; a ``pids`` cgroup adds a hard cap on the
run's whole process tree that no uid trick can escape. It is optional: ``supervisor doctor``
says when it is not available.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/pids")
V2_ROOT = Path("/sys/fs/cgroup")
GROUP_PREFIX = "supervisor-sandbox-"


def pids_parent() -> Path | None:
    """The cgroup directory under which per-run ``pids`` groups can be made, or ``None``."""
    candidates: list[Path] = []
    if (V1_ROOT / "cgroup.procs").exists():
        candidates.append(V1_ROOT)
    controllers = V2_ROOT / "cgroup.controllers"
    if controllers.exists():
        with contextlib.suppress(OSError):
            own = _own_v2_group()
            if own is not None and "pids" in (own / "cgroup.subtree_control").read_text():
                candidates.append(own)
    for parent in candidates:
        if os.access(parent, os.W_OK):
            return parent
    return None


def _own_v2_group() -> Path | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return V2_ROOT / line[3:].lstrip("/")
    return None


class PidsCgroup:
    """A per-run cgroup with ``pids.max``; the sandbox process joins it before exec.

    Args:
        name: Unique suffix (the run id).
        limit: ``pids.max``.
        owner_uid: The uid that joins the group from inside ``preexec`` (after dropping root).
    """

    def __init__(self, name: str, limit: int, owner_uid: int | None) -> None:
        self.path: Path | None = None
        parent = pids_parent()
        if parent is None:
            return
        path = parent / f"{GROUP_PREFIX}{name}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
            if owner_uid is not None:
                os.chown(path / "cgroup.procs", owner_uid, -1)
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return
        self.path = path

    def join(self) -> None:
        """Move the calling process into the group (runs in the child before exec)."""
        if self.path is not None:
            with open(self.path / "cgroup.procs", "w") as procs:
                procs.write(str(os.getpid()))

    def remove(self) -> None:
        """SIGKILL anything still in the group, then delete it."""
        if self.path is not None:
            _remove_group(self.path)


def remove_leftover(name: str) -> None:
    """Delete the group of a run whose supervisor died (see :mod:`sandboxes.workdirs`)."""
    parent = pids_parent()
    if parent is None or not name or "/" in name or name.startswith("."):
        return
    path = parent / f"{GROUP_PREFIX}{name}"
    if path.is_dir():
        _remove_group(path)


def _remove_group(path: Path) -> None:
    for _ in range(50):
        with contextlib.suppress(OSError):
            for pid in (path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
        try:
            path.rmdir()
            return
        except OSError:
            time.sleep(0.02)
