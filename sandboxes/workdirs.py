"""Per-run work directories of the local sandbox, and removing the ones a dead run left behind.

A run's directory is ``<base>/supervisor-sandbox-XXXX/`` holding ``owner.json`` (who made it)
and ``work/`` (bind-mounted at ``/work``). Sandboxed code sees only ``work/``, so it cannot
forge or remove the marker. The run deletes its directory when it ends; a run whose supervisor
process was SIGKILLed cannot, so every later run and ``supervisor doctor`` call :func:`sweep`,
which removes a directory only when all of these hold:

- its name has the prefix, it is a real directory (not a link) owned by the sweeping user;
- it holds a marker this module wrote;
- the marker's owner is provably gone: same host, same pid namespace, and either another boot
  or no process with the owner's pid and start time.

The run's per-run ``pids`` cgroup, if one is left, goes with it.

A directory of another host, another pid namespace, or without a readable marker is left
alone: its owner cannot be checked from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from sandboxes import cgroup

PREFIX = "supervisor-sandbox-"
MARKER = "owner.json"
WORK = "work"
MARKER_FORMAT = 1


def _read(path: str) -> str:
    with contextlib.suppress(OSError):
        return Path(path).read_text().strip()
    return ""


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22)."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name may hold spaces and parens
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _pid_namespace() -> str:
    with contextlib.suppress(OSError):
        return os.readlink("/proc/self/ns/pid")
    return ""


@dataclass(frozen=True)
class Owner:
    """The supervisor process that made a work directory.

    Attributes:
        run_id: The run's id (also names its cgroup, if it had one).
        process_id: The run's process-table id.
        host: Host name.
        boot_id: The kernel's boot id (pids restart on reboot).
        pid_namespace: The owner's pid namespace (pids mean nothing across namespaces).
        pid: The owner's pid.
        start_ticks: The owner's start time (tells a recycled pid from the owner).
    """

    run_id: str
    process_id: str
    host: str
    boot_id: str
    pid_namespace: str
    pid: int
    start_ticks: int

    @classmethod
    def current(cls, run_id: str, process_id: str) -> Owner:
        """This process, as the owner of a new work directory."""
        pid = os.getpid()
        return cls(
            run_id=run_id, process_id=process_id, host=socket.gethostname(),
            boot_id=_read("/proc/sys/kernel/random/boot_id"), pid_namespace=_pid_namespace(),
            pid=pid, start_ticks=_start_ticks(pid) or 0,
        )  # fmt: skip

    def is_gone(self) -> bool | None:
        """True if the owner has certainly exited, False if it runs, None if unknowable here."""
        if self.host != socket.gethostname() or self.pid_namespace != _pid_namespace():
            return None
        if not self.boot_id or self.boot_id != _read("/proc/sys/kernel/random/boot_id"):
            return bool(self.boot_id)  # another boot: gone; no boot id recorded: unknowable
        return _start_ticks(self.pid) != self.start_ticks


def create(
    base_dir: Path | None, run_id: str, process_id: str, ids: tuple[int, int] | None
) -> Path:
    """Make a run's directory with its marker and an empty ``work/``; returns the directory.

    Args:
        base_dir: Parent (default: the system temp directory).
        run_id: The run's id, kept in the marker.
        process_id: The run's process-table id, kept in the marker.
        ids: The (uid, gid) bwrap runs as, when it is not this user: the directory is then
            made searchable (not readable) so that user can reach ``work/``.
    """
    top = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base_dir))
    marker = {"format": MARKER_FORMAT, **asdict(Owner.current(run_id, process_id))}
    fd = os.open(top / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(marker, handle)
    (top / WORK).mkdir(mode=0o700)
    if ids is not None:
        os.chmod(top, 0o711)
    return top


def read_owner(top: Path) -> Owner | None:
    """The owner recorded in a directory's marker, or None if there is no valid marker."""
    try:
        fd = os.open(top / MARKER, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as handle:
            marker = json.loads(handle.read(4096))
        if marker.pop("format") != MARKER_FORMAT:
            return None
        owner = Owner(**marker)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    fields = (owner.run_id, owner.process_id, owner.host, owner.boot_id, owner.pid_namespace)
    if not all(isinstance(value, str) for value in fields) or not all(
        isinstance(value, int) for value in (owner.pid, owner.start_ticks)
    ):
        return None
    return owner


def remove(top: Path) -> bool:
    """Delete a run's directory, even where sandboxed code made parts of it unwritable.

    Returns:
        True when the directory is gone.
    """
    with contextlib.suppress(OSError):
        os.chmod(top, 0o700)
        for directory, subdirs, _ in os.walk(top):  # top-down: fix each dir before entering it
            for name in subdirs:
                path = os.path.join(directory, name)
                if not os.path.islink(path):
                    with contextlib.suppress(OSError):
                        os.chmod(path, 0o700)
    shutil.rmtree(top, ignore_errors=True)
    return not os.path.lexists(top)


def sweep(base_dir: Path | None = None) -> list[Path]:
    """Remove work directories under ``base_dir`` whose owner is gone (see the module doc).

    Args:
        base_dir: Where runs make their directories (default: the system temp directory).

    Returns:
        The directories removed.
    """
    base = base_dir or Path(tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = [entry for entry in os.scandir(base) if entry.name.startswith(PREFIX)]
    except OSError:
        return removed
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                continue
        except OSError:
            continue
        top = Path(entry.path)
        owner = read_owner(top)
        if owner is not None and owner.is_gone() is True and remove(top):
            removed.append(top)
            cgroup.remove_leftover(owner.run_id)
    return removed
