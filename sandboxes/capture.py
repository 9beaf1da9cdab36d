"""Bounded capture of a run's output and safe collection of the files it leaves behind."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from sandboxes.models import safe_relative_path


class CappedBuffer:
    """Keeps the first ``cap`` bytes written to it and counts the rest.

    Args:
        cap: Bytes kept.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.total = 0
        self._chunks: list[bytes] = []
        self._kept = 0

    def write(self, data: bytes) -> None:
        """Count ``data``; keep what fits under the cap."""
        self.total += len(data)
        room = self.cap - self._kept
        if room > 0:
            kept = data[:room]
            self._chunks.append(kept)
            self._kept += len(kept)

    @property
    def truncated(self) -> bool:
        """More was written than kept."""
        return self.total > self._kept

    def getvalue(self) -> bytes:
        """The kept bytes."""
        return b"".join(self._chunks)


class FilesOut:
    """Files collected from a finished run's work directory.

    Attributes:
        files: Relative path -> content.
        skipped: Paths not returned, with the reason in parentheses.
    """

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.skipped: list[str] = []


def collect_files(root: Path, paths: tuple[str, ...], out_dir: str, budget: int) -> FilesOut:
    """Read regular files from a work directory without following any link.

    The run is over (its whole process tree is dead) when this is called; each path component
    is opened with ``O_NOFOLLOW`` relative to its parent, so a symlink or a special file left
    by the sandboxed code can never make the host read anything outside ``root``.

    Args:
        root: The host work directory.
        paths: Relative paths asked for explicitly.
        out_dir: Relative directory whose regular files are all returned.
        budget: Total bytes that may be returned.

    Returns:
        The files and the paths skipped.
    """
    result = FilesOut()
    wanted = list(paths) + _walk_out(root, out_dir, result)
    for relative in dict.fromkeys(wanted):
        content = _read_no_follow(root, safe_relative_path(relative), budget, result)
        if content is None:
            continue
        budget -= len(content)
        result.files[relative] = content
    return result


def _walk_out(root: Path, out_dir: str, result: FilesOut) -> list[str]:
    found: list[str] = []
    top = root / out_dir
    if not top.is_dir() or top.is_symlink():
        return found
    for directory, subdirs, names in os.walk(top, followlinks=False):
        subdirs.sort()
        for name in sorted(names):
            found.append(os.path.relpath(os.path.join(directory, name), root))
            if len(found) > 1000:
                result.skipped.append(f"{out_dir}/... (more than 1000 files)")
                return found
    return found


def _read_no_follow(root: Path, relative: str, budget: int, result: FilesOut) -> bytes | None:
    parts = relative.split("/")
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fds: list[int] = []
    try:
        current = os.open(root, flags_dir)
        fds.append(current)
        for part in parts[:-1]:
            current = os.open(part, flags_dir, dir_fd=current)
            fds.append(current)
        leaf = os.open(
            parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=current
        )
        fds.append(leaf)
        info = os.fstat(leaf)
        if not stat.S_ISREG(info.st_mode):
            result.skipped.append(f"{relative} (not a regular file)")
            return None
        if info.st_size > budget:
            result.skipped.append(f"{relative} (over the files-out budget)")
            return None
        with os.fdopen(os.dup(leaf), "rb") as handle:
            content = handle.read(budget + 1)
        if len(content) > budget:
            result.skipped.append(f"{relative} (over the files-out budget)")
            return None
        return content
    except OSError as exc:
        reason = "a symbolic link" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else "unreadable"
        if exc.errno == errno.ENOENT:
            reason = "missing"
        result.skipped.append(f"{relative} ({reason})")
        return None
    finally:
        for fd in reversed(fds):
            with contextlib.suppress(OSError):
                os.close(fd)
