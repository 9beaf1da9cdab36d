"""Escape attempts, each a real run under bubblewrap: every one must fail inside the sandbox."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.required import require_bwrap

from sandboxes.local import BubblewrapSandbox
from sandboxes.models import Limits, RunRequest


@pytest.fixture
def sandbox() -> BubblewrapSandbox:
    """A local sandbox; without bwrap the test skips locally and fails under CI=true."""
    require_bwrap()
    return BubblewrapSandbox()


def python(code: str, **options: object) -> RunRequest:
    return RunRequest.model_validate({"language": "python", "code": code, **options})


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP server on the host's loopback that the sandbox must not reach."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.5)
    try:
        yield server
    finally:
        server.close()


def test_connect_to_a_host_loopback_listener_is_refused(
    sandbox: BubblewrapSandbox, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    code = (
        "import socket\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
        "    print('CONNECTED')\n"
        "except OSError as e:\n    print('refused', type(e).__name__)\n"
    )
    result = sandbox.run(python(code))
    assert result.exit_code == 0, result.stderr
    assert "refused ConnectionRefusedError" in result.stdout
    with pytest.raises(TimeoutError):
        listener.accept()  # the host side never saw a connection


def test_outbound_internet_is_unreachable(sandbox: BubblewrapSandbox) -> None:
    code = (
        "import socket\n"
        "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=3)\n    print('CONNECTED')\n"
        "except OSError as e:\n    print('failed', e.errno)\n"
    )
    result = sandbox.run(python(code))
    assert result.stdout.startswith("failed"), result.stdout + result.stderr
    assert "CONNECTED" not in result.stdout


def test_dns_resolution_fails(sandbox: BubblewrapSandbox) -> None:
    code = (
        "import socket\n"
        "try:\n    print(socket.getaddrinfo('example.com', 443))\n"
        "except OSError as e:\n    print('dns failed', type(e).__name__)\n"
    )
    result = sandbox.run(python(code))
    assert result.stdout.startswith("dns failed"), result.stdout + result.stderr


def test_the_only_network_interface_is_loopback(sandbox: BubblewrapSandbox) -> None:
    result = sandbox.run(python("import socket; print([n for _, n in socket.if_nameindex()])"))
    assert result.stdout.strip() == "['lo']"


@pytest.mark.parametrize("target", ["/usr/escape", "/etc/escape", "/escape", "/dev/escape"])
def test_writing_outside_the_work_directory_fails(sandbox: BubblewrapSandbox, target: str) -> None:
    code = (
        f"try:\n    open({target!r}, 'w').write('x')\n    print('WROTE')\n"
        "except OSError as e:\n    print('denied', e.errno)\n"
    )
    result = sandbox.run(python(code))
    assert result.stdout.startswith("denied"), result.stdout + result.stderr
    assert not Path(target).exists()


def test_writing_inside_the_work_directory_and_tmp_works(sandbox: BubblewrapSandbox) -> None:
    code = "open('/work/a', 'w').write('x'); open('/tmp/b', 'w').write('y'); print('ok')"
    assert sandbox.run(python(code)).stdout == "ok\n"


def test_a_secret_in_the_host_home_cannot_be_read(sandbox: BubblewrapSandbox) -> None:
    home = Path(os.environ.get("HOME") or "/root")
    secret = home / f".supervisor-sandbox-secret-{uuid.uuid4().hex}"
    secret.write_text("TOP-SECRET-VALUE")
    try:
        code = (
            "import os\n"
            f"for path in [{str(secret)!r}, '/proc/1/root' + {str(secret)!r}]:\n"
            "    try:\n        print('READ', open(path).read())\n"
            "    except OSError as e:\n        print('denied', e.errno)\n"
            "print(sorted(os.listdir('/')))\n"
        )
        result = sandbox.run(python(code))
    finally:
        secret.unlink()
    assert "TOP-SECRET-VALUE" not in result.stdout
    assert result.stdout.count("denied") == 2, result.stdout + result.stderr
    listing = result.stdout.splitlines()[-1]
    assert "'home'" not in listing and "'root'" not in listing


def test_a_symlink_left_in_out_is_not_followed_by_the_host(sandbox: BubblewrapSandbox) -> None:
    secret = Path(os.environ.get("HOME") or "/root") / f".sandbox-link-{uuid.uuid4().hex}"
    secret.write_text("HOST-ONLY")
    try:
        code = f"import os; os.symlink({str(secret)!r}, 'out/leak'); print('linked')"
        result = sandbox.run(python(code, collect=("out/leak",)))
    finally:
        secret.unlink()
    assert result.stdout == "linked\n"
    assert "out/leak" not in result.files
    assert any(item.startswith("out/leak") for item in result.files_skipped)


def test_the_sandbox_runs_unprivileged_without_capabilities(sandbox: BubblewrapSandbox) -> None:
    code = (
        "import os\nprint(os.getuid(), os.getgid())\n"
        "print([l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1])"
    )
    result = sandbox.run(python(code))
    assert result.stdout.split() == ["65534", "65534", "0000000000000000"]


def test_a_fork_bomb_is_contained(sandbox: BubblewrapSandbox) -> None:
    began = time.monotonic()
    bomb = RunRequest(
        language="bash", code=":(){ :|:& };:\nsleep 2\necho survived",
        timeout_seconds=8, limits=Limits(processes=32),
    )  # fmt: skip
    result = sandbox.run(bomb)
    assert time.monotonic() - began < 15
    counter = python(
        "import os, time\nn = 0\ntry:\n    while n < 1000:\n        if os.fork() == 0:\n"
        "            time.sleep(2); os._exit(0)\n        n += 1\n"
        "except OSError as e:\n    print('fork refused after', n, e.errno)\n",
        limits=Limits(processes=32),
    )
    counted = sandbox.run(counter)
    assert counted.stdout.startswith("fork refused after"), counted.stdout + counted.stderr
    assert int(counted.stdout.split()[3]) < 32
    assert result.exit_code is not None
    # The host is unaffected: it still forks, and no sandbox process outlived its run.
    assert subprocess.run(["true"], check=False).returncode == 0
    assert _live_processes_of(65534) == []


def _live_processes_of(uid: int) -> list[str]:
    """Running (non-zombie) processes of ``uid``; exited ones wait only for init to reap them."""
    listing = subprocess.run(
        ["ps", "-o", "stat=,pid=,args=", "-u", str(uid)], capture_output=True, text=True
    ).stdout
    return [line for line in listing.splitlines() if line.strip() and not line.startswith("Z")]


def test_a_memory_bomb_is_stopped_by_the_address_space_limit(sandbox: BubblewrapSandbox) -> None:
    code = "hoard = []\nwhile True:\n    hoard.append(bytearray(32 * 1024 * 1024))\n"
    began = time.monotonic()
    result = sandbox.run(python(code, limits=Limits(memory_bytes=256 * 1024 * 1024)))
    assert time.monotonic() - began < 10
    assert result.exit_code != 0
    assert "MemoryError" in result.stderr


def test_a_cpu_loop_dies_at_the_wall_clock_timeout(sandbox: BubblewrapSandbox) -> None:
    began = time.monotonic()
    result = sandbox.run(python("while True: pass", timeout_seconds=1.5))
    assert result.timed_out and result.killed and result.kill_reason == "timeout"
    assert 1.4 < time.monotonic() - began < 6


def test_a_cpu_loop_dies_at_the_cpu_limit(sandbox: BubblewrapSandbox) -> None:
    result = sandbox.run(python("while True: pass", limits=Limits(cpu_seconds=1)))
    assert not result.timed_out
    assert result.killed and result.kill_reason == "cpu_limit"
    assert result.exit_code == 128 + 24  # SIGXCPU
