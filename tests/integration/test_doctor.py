"""``supervisor doctor`` and the fail-closed refusal when bubblewrap is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import SUPERVISOR
from support.required import require_bwrap

from sandboxes.errors import SandboxUnavailable
from sandboxes.local import BubblewrapSandbox
from sandboxes.models import RunRequest
from sandboxes.seccomp import DENIED
from supervisor.store.provider import SQLModelProvider


@pytest.fixture(autouse=True)
def _require_bwrap() -> None:
    require_bwrap()


@pytest.fixture
def path_without_bwrap(tmp_path: Path) -> str:
    """A PATH holding the tools the CLI needs (python, sh) but not bwrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "python3"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def test_doctor_passes_where_the_sandbox_works(sqlite_url: str) -> None:
    assert SUPERVISOR is not None
    done = subprocess.run([SUPERVISOR, "doctor", "--db", sqlite_url], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("bubblewrap", "user namespace", "network namespace", "pid namespace",
                 "rlimits", "cgroup pids", "chromium", "ledger"):  # fmt: skip
        assert name in done.stdout
    lines = {line[5:23].strip(): line for line in done.stdout.splitlines() if line[:4] == "OK  "}
    assert "disabled: yes" in lines["nested userns"]
    assert f"active: {len(DENIED)} syscalls denied" in lines["seccomp filter"]


def test_without_bwrap_the_sandbox_refuses_and_says_how_to_fix_it(
    monkeypatch: pytest.MonkeyPatch, path_without_bwrap: str, sqlite_url: str
) -> None:
    ledger = SQLModelProvider(sqlite_url).ledger
    sandbox = BubblewrapSandbox(ledger=ledger)
    sandbox.run(RunRequest(argv=("true",)))  # works with bwrap on PATH
    monkeypatch.setenv("PATH", path_without_bwrap)
    with pytest.raises(SandboxUnavailable) as refused:
        sandbox.run(RunRequest(argv=("touch", "/work/should-not-exist")))
    assert refused.value.code == "sandbox_unavailable"
    assert "apt-get install bubblewrap" in str(refused.value)
    assert "no unconfined fallback" in str(refused.value)
    kinds = [event.kind for event in ledger.trace_events()]
    assert kinds[-1] == "sandbox.refused"
    statuses = sorted((record.status, record.pid is None) for record in ledger.list_processes())
    assert statuses == [("exited", False), ("refused", True)]  # the refused run never started


def test_doctor_and_exec_fail_closed_without_bwrap(
    path_without_bwrap: str, sqlite_url: str
) -> None:
    assert SUPERVISOR is not None
    env = {**os.environ, "PATH": path_without_bwrap}
    doctor = subprocess.run([SUPERVISOR, "doctor", "--db", sqlite_url], capture_output=True,
                            text=True, timeout=120, env=env)  # fmt: skip
    assert doctor.returncode == 1
    assert "FAIL bubblewrap" in doctor.stdout
    assert "apt-get install bubblewrap" in doctor.stdout
    run = subprocess.run([SUPERVISOR, "sandbox", "exec", "--db", sqlite_url, "--", "echo", "hi"],
                         capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert run.returncode == 2 and run.stdout == ""
    assert "error [sandbox_unavailable]" in run.stderr
    assert "apt-get install bubblewrap" in run.stderr


#: A bwrap that accepts the hardening flags but applies none of them, and one too old for them.
LAX_BWRAP = """#!/usr/bin/python3
import os, sys
args, skip = [], False
for arg in sys.argv[1:]:
    if skip:
        skip = False
    elif arg == "--seccomp":
        skip = True
    elif arg not in ("--disable-userns", "--assert-userns-disabled"):
        args.append(arg)
os.execv(REAL, [REAL, *args])
"""
OLD_BWRAP = """#!/bin/sh
if [ "$1" = --version ]; then echo "bubblewrap 0.7.0"; exit 0; fi
exec REAL "$@"
"""


@pytest.fixture
def fake_bwrap_dir() -> Iterator[Path]:
    """A directory other users can search (bwrap runs as nobody when the tests run as root)."""
    folder = Path(tempfile.mkdtemp(prefix="fake-bwrap-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize(
    ("script", "failures"),
    [
        pytest.param(LAX_BWRAP, ["FAIL nested userns", "FAIL seccomp filter"], id="lax"),
        pytest.param(OLD_BWRAP, ["FAIL bubblewrap"], id="0.7.0"),
    ],
)
def test_doctor_and_exec_fail_closed_when_bwrap_cannot_apply_the_hardening(
    fake_bwrap_dir: Path, sqlite_url: str, script: str, failures: list[str]
) -> None:
    real = shutil.which("bwrap")
    assert SUPERVISOR is not None and real is not None
    fake = fake_bwrap_dir / "bwrap"
    fake.write_text(script.replace("REAL", repr(real) if "python" in script else real))
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake_bwrap_dir}:{os.environ['PATH']}"}
    doctor = subprocess.run([SUPERVISOR, "doctor", "--db", sqlite_url], capture_output=True,
                            text=True, timeout=120, env=env)  # fmt: skip
    assert doctor.returncode == 1, doctor.stdout
    for failure in failures:
        assert failure in doctor.stdout
    assert "refuses to run code" in doctor.stdout
    run = subprocess.run([SUPERVISOR, "sandbox", "exec", "--db", sqlite_url, "--",
                          "unshare", "-Ur", "true"],
                         capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert run.returncode == 2 and run.stdout == ""
    assert "error [sandbox_unavailable]" in run.stderr
    assert "Traceback" not in run.stderr


def test_doctor_takes_a_path_like_every_command_and_creates_nothing(tmp_path: Path) -> None:
    assert SUPERVISOR is not None
    target = tmp_path / "nowhere" / "ledger.db"
    done = subprocess.run([SUPERVISOR, "doctor", "--db", str(target)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARN ledger" in done.stdout and "no ledger there" in done.stdout
    assert "Traceback" not in done.stderr
    assert not target.parent.exists()  # nothing written


def test_doctor_with_an_unsupported_url_is_a_typed_error(tmp_path: Path) -> None:
    assert SUPERVISOR is not None
    done = subprocess.run([SUPERVISOR, "doctor", "--db", "mysql://root@localhost/x"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("error [unsupported_ledger_url]: ")
    assert "Traceback" not in done.stderr


def test_doctor_does_not_create_a_missing_ledger(tmp_path: Path) -> None:
    assert SUPERVISOR is not None
    target = tmp_path / "nowhere" / "ledger.db"
    done = subprocess.run([SUPERVISOR, "doctor", "--db", f"sqlite:///{target}"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARN ledger" in done.stdout and "no ledger there" in done.stdout
    assert not target.parent.exists()
