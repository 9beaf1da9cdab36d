"""Running the real ``supervisor`` console script, and checking that it wrote nothing."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

SUPERVISOR = shutil.which("supervisor", path=str(Path(sys.executable).parent))

#: (sha256 of the bytes, mtime in ns) per file, "dir" per folder, keyed by relative path.
Snapshot = dict[str, tuple[str, int] | str]


def run_cli(
    *args: str | bytes,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 90,
) -> subprocess.CompletedProcess[str]:
    """``supervisor ARGS...`` in a subprocess; output decoded as UTF-8 (bad bytes replaced)."""
    assert SUPERVISOR is not None, "the console script is not installed"
    return subprocess.run(
        [SUPERVISOR, *args], capture_output=True, text=True, encoding="utf-8",
        errors="replace", cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout,
    )  # fmt: skip


def snapshot(folder: Path) -> Snapshot:
    """Every file (content hash and mtime) and folder under ``folder``."""
    found: Snapshot = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_dir():
            found[key] = "dir"
        else:
            stat = path.stat()
            found[key] = (hashlib.sha256(path.read_bytes()).hexdigest(), stat.st_mtime_ns)
    return found


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: str) -> None:
    """Exit 2, ``error [code]: ...`` plus at most a hint line on stderr, no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith(f"error [{code}]: "), result.stderr
    assert len(lines) <= 2, result.stderr
