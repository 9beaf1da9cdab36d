"""The sandbox's seccomp filter, run through a classic-BPF interpreter and checked against
libseccomp's syscall tables."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct

import pytest
from support.required import unavailable

from sandboxes import seccomp
from sandboxes.errors import SandboxUnavailable
from sandboxes.seccomp import AARCH64, DENIED, X86_64, Arch

ALLOW = seccomp.RET_ALLOW
EPERM = seccomp.RET_ERRNO | errno.EPERM
ENOSYS = seccomp.RET_ERRNO | errno.ENOSYS
KILL = seccomp.RET_KILL_PROCESS
AUDIT_ARCH_I386 = 0x40000003

# clone(2) flags glibc passes for pthread_create and fork.
THREAD_FLAGS = 0x003D0F00  # VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
FORK_FLAGS = 0x01200011  # CHILD_SETTID|CHILD_CLEARTID|SIGCHLD
CLONE_FILES = 0x00000400
NAMESPACE_FLAGS = {
    "CLONE_NEWNS": seccomp.CLONE_NEWNS,
    "CLONE_NEWCGROUP": seccomp.CLONE_NEWCGROUP,
    "CLONE_NEWUTS": seccomp.CLONE_NEWUTS,
    "CLONE_NEWIPC": seccomp.CLONE_NEWIPC,
    "CLONE_NEWUSER": seccomp.CLONE_NEWUSER,
    "CLONE_NEWPID": seccomp.CLONE_NEWPID,
    "CLONE_NEWNET": seccomp.CLONE_NEWNET,
}


def run_filter(compiled: bytes, arch: int, nr: int, args: tuple[int, ...] = ()) -> int:
    """Evaluate a compiled filter on one syscall, as the kernel does (the opcodes used here)."""
    padded = (*args, *([0] * (6 - len(args))))
    data = struct.pack("=iIQ6Q", nr, arch, 0, *padded)
    program = seccomp.decode(compiled)
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == seccomp.LD_W_ABS:
            (accumulator,) = struct.unpack_from("=I", data, k)
            pc += 1
        elif code == seccomp.RET_K:
            return k
        elif code in (seccomp.JEQ_K, seccomp.JGE_K, seccomp.JSET_K):
            taken = {
                seccomp.JEQ_K: accumulator == k,
                seccomp.JGE_K: accumulator >= k,
                seccomp.JSET_K: bool(accumulator & k),
            }[code]
            pc += 1 + (jt if taken else jf)
        else:
            raise AssertionError(f"opcode {code:#x} at {pc} is not one the filter should use")


@pytest.fixture(params=[X86_64, AARCH64], ids=lambda arch: arch.name)
def arch(request: pytest.FixtureRequest) -> Arch:
    value: Arch = request.param
    return value


@pytest.fixture
def compiled(arch: Arch) -> bytes:
    return seccomp.build_filter(arch)


def test_every_denied_syscall_answers_eperm(arch: Arch, compiled: bytes) -> None:
    for name in DENIED:
        assert run_filter(compiled, arch.audit_arch, arch.numbers[name]) == EPERM, name


@pytest.mark.parametrize("flag", NAMESPACE_FLAGS.values(), ids=NAMESPACE_FLAGS.keys())
def test_clone_and_unshare_with_a_namespace_flag_answer_eperm(
    arch: Arch, compiled: bytes, flag: int
) -> None:
    assert run_filter(compiled, arch.audit_arch, arch.numbers["clone"], (flag | FORK_FLAGS,)) == (
        EPERM
    )
    assert run_filter(compiled, arch.audit_arch, arch.numbers["unshare"], (flag,)) == EPERM


def test_unshare_of_a_time_namespace_answers_eperm(arch: Arch, compiled: bytes) -> None:
    unshare = arch.numbers["unshare"]
    assert run_filter(compiled, arch.audit_arch, unshare, (seccomp.CLONE_NEWTIME,)) == EPERM


def test_threads_fork_and_harmless_unshare_are_allowed(arch: Arch, compiled: bytes) -> None:
    clone, unshare = arch.numbers["clone"], arch.numbers["unshare"]
    assert run_filter(compiled, arch.audit_arch, clone, (THREAD_FLAGS,)) == ALLOW
    assert run_filter(compiled, arch.audit_arch, clone, (FORK_FLAGS,)) == ALLOW
    # The exit signal lives in clone's low byte; 0x80 there is not CLONE_NEWTIME.
    assert run_filter(compiled, arch.audit_arch, clone, (0x80 | 17,)) == ALLOW
    assert run_filter(compiled, arch.audit_arch, unshare, (CLONE_FILES,)) == ALLOW


def test_clone3_answers_enosys_so_libc_falls_back_to_clone(arch: Arch, compiled: bytes) -> None:
    assert run_filter(compiled, arch.audit_arch, arch.numbers["clone3"]) == ENOSYS


def test_other_syscalls_are_allowed(arch: Arch, compiled: bytes) -> None:
    blocked = {arch.numbers[name] for name in (*DENIED, *seccomp.INSPECTED)}
    for nr in range(0, 460):
        if nr not in blocked:
            assert run_filter(compiled, arch.audit_arch, nr) == ALLOW, nr


def test_a_foreign_abi_is_killed(arch: Arch, compiled: bytes) -> None:
    other = AARCH64 if arch is X86_64 else X86_64
    for foreign in (AUDIT_ARCH_I386, other.audit_arch):
        assert run_filter(compiled, foreign, 39) == KILL


def test_x32_syscalls_are_killed_on_x86_64() -> None:
    compiled = seccomp.build_filter(X86_64)
    for nr in (39, 56, 101, 250):  # getpid, clone, ptrace, keyctl through the x32 entry
        assert run_filter(compiled, X86_64.audit_arch, seccomp.X32_SYSCALL_BIT | nr) == KILL


def test_the_program_is_well_formed(compiled: bytes) -> None:
    program = seccomp.decode(compiled)
    assert len(compiled) == 8 * len(program) and 0 < len(program) < 4096  # BPF_MAXINSNS
    assert program[-1][0] == seccomp.RET_K
    for index, (code, jt, jf, _) in enumerate(program):
        if code in (seccomp.JEQ_K, seccomp.JGE_K, seccomp.JSET_K):
            assert index + 1 + max(jt, jf) < len(program)


def test_a_jump_out_of_range_is_refused() -> None:
    code = [seccomp.Instruction(seccomp.JEQ_K, 1, "far", 0)]
    with pytest.raises(ValueError, match="out of range"):
        seccomp.assemble(code, {"far": 300})


def test_an_unknown_machine_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("platform.machine", lambda: "riscv64")
    with pytest.raises(SandboxUnavailable) as refused:
        seccomp.build_filter()
    assert refused.value.code == "sandbox_unavailable"


def test_the_filter_file_holds_the_program_from_its_start() -> None:
    with seccomp.filter_fd() as fd:
        assert os.read(fd, 1 << 16) == seccomp.build_filter()


def test_syscall_numbers_match_libseccomp() -> None:
    """Every number in the tables is what libseccomp (Debian's libseccomp2) says it is."""
    found = ctypes.util.find_library("seccomp")
    if found is None:
        unavailable("libseccomp is not installed: run `bash .ci/system-deps.sh`")
    library = ctypes.CDLL(found)
    resolve = library.seccomp_syscall_resolve_name_arch
    resolve.argtypes = (ctypes.c_uint32, ctypes.c_char_p)
    resolve.restype = ctypes.c_int
    for arch in (X86_64, AARCH64):  # libseccomp's arch tokens are the audit arch values
        assert set(arch.numbers) == {*DENIED, *seccomp.INSPECTED}
        for name, number in arch.numbers.items():
            assert resolve(arch.audit_arch, name.encode()) == number, (arch.name, name)
