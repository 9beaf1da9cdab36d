"""The seccomp filter of the local sandbox: a small classic-BPF program built here.

bubblewrap's ``--seccomp FD`` installs a compiled classic-BPF program (``struct sock_filter``
records) in the sandboxed process just before it runs the command. This module writes that
program itself rather than through libseccomp: the filter is short, has no runtime dependency,
and :func:`decode` plus the unit tests (an interpreter and a cross-check of every syscall number
against libseccomp's tables) make each instruction reviewable.

What the filter does, in order:

1. **Architecture check.** A syscall made with any ABI other than the host's native one (e.g.
   i386 ``int 0x80`` on x86_64) kills the process: the numbers below mean nothing there.
2. **x32 refusal** (x86_64): numbers with the x32 bit set kill the process too; the x32 ABI
   would otherwise reach the same kernel entry points under other numbers.
3. **Denied syscalls** (:data:`DENIED`) answer ``EPERM``: namespaces, mounts, keyrings, eBPF,
   perf, ptrace, cross-process memory, kexec, modules, userfaultfd, io_uring, file handles.
4. **clone / unshare with a namespace flag** (``CLONE_NEWUSER``, ``CLONE_NEWNS``, ...) answer
   ``EPERM``; without one (threads, fork, ``unshare(CLONE_FILES)``) they run.
5. **clone3** answers ``ENOSYS``: its flags live in memory a filter cannot read, and glibc falls
   back to ``clone`` (which step 4 checks) when clone3 is "not implemented".
6. Everything else is allowed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from sandboxes.errors import SandboxUnavailable

# Return values (linux/seccomp.h).
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

# Classic BPF opcodes used here (linux/bpf_common.h).
LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS: A = 32-bit word at offset k of seccomp_data
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K: jump if A & k
RET_K = 0x06  # BPF_RET | BPF_K

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
OFFSET_NR = 0
OFFSET_ARCH = 4
OFFSET_ARG0_LOW = 16  # the low 32 bits of args[0] on a little-endian machine

X32_SYSCALL_BIT = 0x40000000

#: Namespace flags of clone(2)/unshare(2) (linux/sched.h).
CLONE_NEWTIME = 0x00000080
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
#: clone(2) keeps the exit signal in its low byte, so CLONE_NEWTIME (0x80) is clone3/unshare only.
CLONE_NAMESPACES = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
    | CLONE_NEWNET
)  # fmt: skip
UNSHARE_NAMESPACES = CLONE_NAMESPACES | CLONE_NEWTIME

#: Syscalls that always answer EPERM inside the sandbox, each with why.
DENIED: dict[str, str] = {
    "setns": "joins another namespace",
    "mount": "changes the mount tree",
    "umount2": "changes the mount tree",
    "pivot_root": "changes the root of the mount tree",
    "move_mount": "new mount API",
    "open_tree": "new mount API (clones a mount)",
    "fsopen": "new mount API",
    "fsconfig": "new mount API",
    "fsmount": "new mount API",
    "fspick": "new mount API",
    "mount_setattr": "new mount API (changes mount flags)",
    "keyctl": "kernel keyrings are not namespaced",
    "add_key": "kernel keyrings are not namespaced",
    "request_key": "kernel keyrings are not namespaced",
    "bpf": "eBPF programs and maps: a large kernel attack surface",
    "perf_event_open": "performance counters: kernel attack surface and side channels",
    "ptrace": "inspects and controls other processes",
    "process_vm_readv": "reads another process's memory",
    "process_vm_writev": "writes another process's memory",
    "kexec_load": "loads a new kernel",
    "kexec_file_load": "loads a new kernel",
    "init_module": "loads a kernel module",
    "finit_module": "loads a kernel module",
    "delete_module": "unloads a kernel module",
    "userfaultfd": "stretches kernel race windows that exploits rely on",
    "io_uring_setup": "io_uring: its operations bypass this filter and it is a frequent CVE source",
    "io_uring_enter": "io_uring",
    "io_uring_register": "io_uring",
    "open_by_handle_at": "opens files by handle, around the mount view",
}

#: Syscalls the filter inspects instead of denying outright.
INSPECTED = ("clone", "unshare", "clone3")


@dataclass(frozen=True)
class Arch:
    """One native syscall ABI: its audit arch value, syscall numbers, and whether it has x32."""

    name: str
    audit_arch: int
    numbers: dict[str, int]
    has_x32: bool = False


# Numbers from the kernel's syscall tables (arch/x86/entry/syscalls/syscall_64.tbl and
# include/uapi/asm-generic/unistd.h); tests/unit/test_seccomp.py checks them against libseccomp.
X86_64 = Arch(
    "x86_64", 0xC000003E, has_x32=True,
    numbers={
        "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "move_mount": 429,
        "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321,
        "perf_event_open": 298, "ptrace": 101, "process_vm_readv": 310,
        "process_vm_writev": 311, "kexec_load": 246, "kexec_file_load": 320,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "userfaultfd": 323,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "open_by_handle_at": 304, "clone": 56, "unshare": 272, "clone3": 435,
    },
)  # fmt: skip
AARCH64 = Arch(
    "aarch64", 0xC00000B7,
    numbers={
        "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "move_mount": 429,
        "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280,
        "perf_event_open": 241, "ptrace": 117, "process_vm_readv": 270,
        "process_vm_writev": 271, "kexec_load": 104, "kexec_file_load": 294,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "userfaultfd": 282,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "open_by_handle_at": 265, "clone": 220, "unshare": 97, "clone3": 435,
    },
)  # fmt: skip
ARCHES = {"x86_64": X86_64, "amd64": X86_64, "aarch64": AARCH64, "arm64": AARCH64}


def native_arch() -> Arch:
    """The syscall ABI of this host.

    Raises:
        SandboxUnavailable: No syscall table for this machine, so no filter (fail closed).
    """
    machine = platform.machine().lower()
    arch = ARCHES.get(machine)
    if arch is None or sys.byteorder != "little":
        raise SandboxUnavailable(
            f"The sandbox has no seccomp syscall table for {machine or 'this machine'}, so it "
            "refuses to run.",
            hint="Run on x86_64 or aarch64, or use the e2b backend.",
        )
    return arch


@dataclass(frozen=True)
class Instruction:
    """One ``struct sock_filter``; ``jt``/``jf`` are label names until :func:`assemble`."""

    code: int
    k: int
    jt: str | int = 0
    jf: str | int = 0


def program(arch: Arch) -> tuple[list[Instruction], dict[str, int]]:
    """The filter for ``arch`` as labelled instructions, and the index of each label."""
    numbers = arch.numbers
    code: list[Instruction] = [
        Instruction(LD_W_ABS, OFFSET_ARCH),
        Instruction(JEQ_K, arch.audit_arch, 0, "kill"),
        Instruction(LD_W_ABS, OFFSET_NR),
    ]
    if arch.has_x32:
        code.append(Instruction(JGE_K, X32_SYSCALL_BIT, "kill", 0))
    for name in sorted(DENIED, key=numbers.__getitem__):
        code.append(Instruction(JEQ_K, numbers[name], "eperm", 0))
    code += [
        Instruction(JEQ_K, numbers["clone3"], "enosys", 0),
        Instruction(JEQ_K, numbers["clone"], "clone", 0),
        Instruction(JEQ_K, numbers["unshare"], "unshare", 0),
        Instruction(RET_K, RET_ALLOW),
    ]
    labels = {"clone": len(code)}
    code += [Instruction(LD_W_ABS, OFFSET_ARG0_LOW),
             Instruction(JSET_K, CLONE_NAMESPACES, "eperm", "allow")]  # fmt: skip
    labels["unshare"] = len(code)
    code += [Instruction(LD_W_ABS, OFFSET_ARG0_LOW),
             Instruction(JSET_K, UNSHARE_NAMESPACES, "eperm", "allow")]  # fmt: skip
    returns = {"allow": RET_ALLOW, "eperm": RET_ERRNO | errno.EPERM,
               "enosys": RET_ERRNO | errno.ENOSYS, "kill": RET_KILL_PROCESS}  # fmt: skip
    for label, value in returns.items():
        labels[label] = len(code)
        code.append(Instruction(RET_K, value))
    return code, labels


def assemble(code: list[Instruction], labels: dict[str, int]) -> bytes:
    """Resolve labels to forward offsets and pack ``struct sock_filter`` records (native order).

    Raises:
        ValueError: A jump goes backwards or further than 255 instructions (cBPF cannot).
    """
    packed = bytearray()
    for index, instruction in enumerate(code):
        offsets = []
        for target in (instruction.jt, instruction.jf):
            offset = target if isinstance(target, int) else labels[target] - index - 1
            if not 0 <= offset <= 255:
                raise ValueError(f"jump from {index} to {target!r} is out of range")
            offsets.append(offset)
        packed += struct.pack("=HBBI", instruction.code, offsets[0], offsets[1], instruction.k)
    return bytes(packed)


def build_filter(arch: Arch | None = None) -> bytes:
    """The compiled filter for ``arch`` (default: this host), ready for ``bwrap --seccomp``.

    Raises:
        SandboxUnavailable: No syscall table for this host.
    """
    return assemble(*program(arch or native_arch()))


def decode(compiled: bytes) -> list[tuple[int, int, int, int]]:
    """The (code, jt, jf, k) records of a compiled filter, for review and tests."""
    return [struct.unpack_from("=HBBI", compiled, offset) for offset in range(0, len(compiled), 8)]


def summary() -> str:
    """One line for ``supervisor doctor``: how many syscalls the filter denies, and the rest."""
    return (
        f"active: {len(DENIED)} syscalls denied (EPERM), clone/unshare with namespace flags "
        "refused, clone3 answers ENOSYS, other ABIs killed"
    )


@contextlib.contextmanager
def filter_fd() -> Iterator[int]:
    """A memory file holding the compiled filter, read from its start; closed on exit.

    Pass it to bwrap with ``--seccomp FD`` and ``pass_fds=(fd,)``.

    Raises:
        SandboxUnavailable: No syscall table for this host.
    """
    compiled = build_filter()
    fd = os.memfd_create("supervisor-seccomp", os.MFD_CLOEXEC)
    try:
        view = memoryview(compiled)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)
