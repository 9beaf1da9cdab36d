"""Nested namespaces and escape syscalls, each tried for real under bubblewrap: all must fail,
while ordinary programs (threads, subprocesses, pipelines) keep working."""

from __future__ import annotations

import platform

import pytest
from support.required import require_bwrap

from sandboxes import seccomp
from sandboxes.local import BubblewrapSandbox
from sandboxes.models import RunRequest


@pytest.fixture
def sandbox() -> BubblewrapSandbox:
    """A local sandbox; without bwrap the test skips locally and fails under CI=true."""
    require_bwrap()
    return BubblewrapSandbox()


def python(code: str) -> RunRequest:
    return RunRequest(language="python", code=code)


NESTED = {
    "unshare -Ur": ("unshare", "-Ur", "true"),
    "unshare -Urn": ("unshare", "-Urn", "true"),
    "unshare -Urm mount": ("unshare", "-Urm", "mount", "-t", "tmpfs", "none", "/tmp"),
}


@pytest.mark.parametrize("argv", NESTED.values(), ids=NESTED.keys())
def test_unshare_cannot_make_a_nested_user_namespace(
    sandbox: BubblewrapSandbox, argv: tuple[str, ...]
) -> None:
    result = sandbox.run(RunRequest(argv=argv))
    assert result.exit_code != 0, result.stdout
    assert "Operation not permitted" in result.stderr


PRELUDE = (
    "import ctypes, errno, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "L = ctypes.c_long\n"
    "def call(name, nr, *args):\n"
    "    ctypes.set_errno(0)\n"
    "    rc = libc.syscall(L(nr), *args)\n"
    "    print(name, rc, errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))\n"
)


def test_python_cannot_unshare_or_clone_a_user_namespace(sandbox: BubblewrapSandbox) -> None:
    numbers = seccomp.native_arch().numbers
    code = PRELUDE + (
        "ctypes.set_errno(0)\n"
        f"print('unshare', libc.unshare({seccomp.CLONE_NEWUSER}),"
        " errno.errorcode.get(ctypes.get_errno()))\n"
        "if hasattr(os, 'unshare'):\n"  # Python 3.12+; Debian 12's python3 is 3.11
        "    try:\n        os.unshare(os.CLONE_NEWUSER)\n        print('os.unshare 0 -')\n"
        "    except OSError as e:\n        print('os.unshare -1', errno.errorcode[e.errno])\n"
        "ctypes.set_errno(0)\n"
        f"rc = libc.syscall(L({numbers['clone']}), L({seccomp.CLONE_NEWUSER} | 17), L(0), L(0),"
        " L(0), L(0))\n"
        "if rc == 0:\n    os._exit(0)\n"
        "print('clone', rc, errno.errorcode.get(ctypes.get_errno()))\n"
    )
    result = sandbox.run(python(code))
    assert result.exit_code == 0, result.stderr
    answers = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert {"unshare", "clone"} <= set(answers)
    assert answers == {name: "-1 EPERM" for name in answers}


def test_escape_syscalls_answer_eperm(sandbox: BubblewrapSandbox) -> None:
    n = seccomp.native_arch().numbers
    code = PRELUDE + (
        f"call('keyctl', {n['keyctl']}, L(0), L(-3), L(1))\n"  # KEYCTL_GET_KEYRING_ID session
        f"call('add_key', {n['add_key']}, b'user', b'k', b'v', L(1), L(-2))\n"
        f"call('request_key', {n['request_key']}, b'user', b'k', None, L(0))\n"
        f"call('ptrace', {n['ptrace']}, L(0), L(0), L(0), L(0))\n"  # PTRACE_TRACEME
        f"call('mount', {n['mount']}, b'none', b'/tmp', b'tmpfs', L(0), None)\n"
        f"call('umount2', {n['umount2']}, b'/tmp', L(0))\n"
        f"call('pivot_root', {n['pivot_root']}, b'/tmp', b'/tmp')\n"
        f"call('fsopen', {n['fsopen']}, b'tmpfs', L(0))\n"
        f"call('open_tree', {n['open_tree']}, L(-100), b'/tmp', L(1))\n"
        f"call('setns', {n['setns']}, L(0), L(0))\n"
        f"call('bpf', {n['bpf']}, L(0), None, L(0))\n"
        f"call('perf_event_open', {n['perf_event_open']}, None, L(0), L(-1), L(-1), L(0))\n"
        f"call('process_vm_readv', {n['process_vm_readv']}, L(os.getpid()), None, L(0), None,"
        " L(0), L(0))\n"
        f"call('userfaultfd', {n['userfaultfd']}, L(1))\n"  # UFFD_USER_MODE_ONLY
        f"call('io_uring_setup', {n['io_uring_setup']}, L(1), None)\n"
        f"call('open_by_handle_at', {n['open_by_handle_at']}, L(-100), None, L(0))\n"
        f"call('init_module', {n['init_module']}, None, L(0), b'')\n"
        f"call('kexec_load', {n['kexec_load']}, L(0), L(0), None, L(0))\n"
        "call('getpid', 39 if os.uname().machine == 'x86_64' else 172)\n"
    )
    result = sandbox.run(python(code))
    assert result.exit_code == 0, result.stderr
    answers = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()}
    assert answers.pop("getpid")[0] != "-1"  # allowed syscalls still work
    assert answers == {name: ["-1", "EPERM"] for name in answers}
    assert len(answers) == 18


def test_the_filter_is_installed_and_the_x32_abi_is_killed(sandbox: BubblewrapSandbox) -> None:
    status = sandbox.run(RunRequest(argv=("grep", "^Seccomp:", "/proc/self/status")))
    assert status.stdout.split() == ["Seccomp:", "2"]
    if platform.machine() != "x86_64":
        return
    code = (
        "import ctypes\n"
        f"ctypes.CDLL(None).syscall(ctypes.c_long({seccomp.X32_SYSCALL_BIT} | 39))\n"
        "print('survived')\n"
    )
    result = sandbox.run(python(code))
    assert result.stdout == ""
    assert result.exit_code == 128 + 31  # SIGSYS: the filter kills the process


def test_ordinary_programs_still_work(sandbox: BubblewrapSandbox) -> None:
    code = (
        "import concurrent.futures, os, subprocess, threading\n"
        "with concurrent.futures.ThreadPoolExecutor(8) as pool:\n"
        "    print('threads', sum(pool.map(lambda n: n * n, range(100))))\n"
        "print('subprocess', subprocess.run(['sh', '-c', 'echo a | tr a b'],"
        " capture_output=True, text=True, check=True).stdout.strip())\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    os._exit(7)\n"
        "print('fork', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
        "spawned = os.posix_spawn('/bin/true', ['true'], {})\n"
        "print('posix_spawn', os.waitstatus_to_exitcode(os.waitpid(spawned, 0)[1]))\n"
        "lock = threading.Lock()\nwith lock:\n    print('lock ok')\n"
    )
    result = sandbox.run(python(code))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == ["threads 328350", "subprocess b", "fork 7",
                                          "posix_spawn 0", "lock ok"]  # fmt: skip
    pipeline = sandbox.run(
        RunRequest(language="bash", code="seq 1 1000 | sort -rn | head -n 1\nsleep 0.1 &\nwait\n")
    )
    assert pipeline.exit_code == 0 and pipeline.stdout == "1000\n", pipeline.stderr
