"""The local sandbox: bubblewrap with every namespace unshared, rlimits and a wall clock.

Inside: read-only ``/usr`` (and the ``/bin``, ``/lib``, ``/lib64`` links), a few ``/etc`` files
the dynamic loader needs, fresh ``/proc`` and ``/dev``, a private ``/tmp``, and a private work
directory at ``/work`` (``/work/out`` is returned). No network, no host home, no capabilities,
no nested user namespaces, a seccomp filter (:mod:`sandboxes.seccomp`), uid/gid 65534, a new
session, killed with its parent. See docs/sandbox.md for what this does and does not isolate.
"""

from __future__ import annotations

import os
import resource
import selectors
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from sandboxes import seccomp, workdirs
from sandboxes.base import OUT_DIR, RawRun, RunContext, Sandbox
from sandboxes.capture import CappedBuffer, collect_files
from sandboxes.cgroup import PidsCgroup
from sandboxes.events import RunLedger, RunSink
from sandboxes.isolation import NO_NESTED_USERNS, drop_to, find_bwrap, require_isolation
from sandboxes.models import KillReason, Limits, RunRequest, safe_relative_path
from sandboxes.proctree import terminate_run

ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/alternatives")
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
SCRIPT_NAME = {"python": ".supervisor_main.py", "bash": ".supervisor_main.sh",
               "sh": ".supervisor_main.sh"}  # fmt: skip
INTERPRETER = {"python": ("/usr/bin/python3", "-I", "-B"), "bash": ("/bin/bash",),
               "sh": ("/bin/sh",)}  # fmt: skip
KILL_GRACE_SECONDS = 2.0


def bwrap_argv(bwrap: str, workdir: Path, request: RunRequest, seccomp_fd: int) -> list[str]:
    """The bubblewrap command line for one run (isolation flags first, then the command).

    ``seccomp_fd`` holds the compiled filter (:func:`sandboxes.seccomp.filter_fd`); the caller
    passes it to bwrap with ``pass_fds``.
    """
    argv = [
        bwrap, "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534",
        *NO_NESTED_USERNS, "--seccomp", str(seccomp_fd),
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
        "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
    ]  # fmt: skip
    for path in ETC_FILES:
        if os.path.exists(path):
            argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(request.limits.tmp_bytes), "--tmpfs", "/tmp",
             "--bind", str(workdir), "/work", "--remount-ro", "/dev", "--remount-ro", "/",
             "--chdir", "/work", "--clearenv"]  # fmt: skip
    env = {"PATH": SANDBOX_PATH, "HOME": "/work", "LANG": "C.UTF-8", "TMPDIR": "/tmp",
           "PYTHONDONTWRITEBYTECODE": "1", **request.env}  # fmt: skip
    for key, value in env.items():
        argv += ["--setenv", key, value]
    if request.argv is not None:
        return [*argv, "--", *request.argv]
    assert request.language is not None
    script = f"/work/{SCRIPT_NAME[request.language]}"
    return [*argv, "--", *INTERPRETER[request.language], script]


def _rlimits(limits: Limits) -> list[tuple[int, tuple[int, int]]]:
    cpu = limits.cpu_seconds
    return [
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),  # SIGXCPU at the soft limit, SIGKILL a second on
        (resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes)),
        (resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes)),
        (resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files)),
        (resource.RLIMIT_NPROC, (limits.processes, limits.processes)),
        (resource.RLIMIT_CORE, (0, 0)),
    ]


class BubblewrapSandbox(Sandbox):
    """Runs code under bubblewrap on this host (the default backend).

    Args:
        ledger: Where runs are recorded; optional.
        sinks: More event sinks.
        base_dir: Where per-run work directories are made (default: the system temp dir);
            every run first removes the ones dead runs left there (:func:`workdirs.sweep`).
    """

    name = "local"

    def __init__(
        self,
        *,
        ledger: RunLedger | None = None,
        sinks: tuple[RunSink, ...] | list[RunSink] = (),
        base_dir: Path | None = None,
    ) -> None:
        super().__init__(ledger=ledger, sinks=sinks)
        self.base_dir = base_dir
        self._verified_bwrap: str | None = None

    def check_available(self) -> None:
        """Probe bubblewrap and namespaces (cached while ``bwrap`` resolves to the same file).

        Raises:
            SandboxUnavailable: Isolation does not work; the message says how to fix it.
        """
        current = find_bwrap()
        if current is not None and current == self._verified_bwrap:
            return
        self._verified_bwrap = None
        self._verified_bwrap = require_isolation()

    def execute(self, context: RunContext) -> RawRun:
        """Run the request in a fresh work directory, then delete it."""
        bwrap = self._verified_bwrap or require_isolation()
        workdirs.sweep(self.base_dir)
        ids = drop_to()
        top = workdirs.create(self.base_dir, context.run_id, context.process_id, ids)
        try:
            workdir = top / workdirs.WORK
            self._prepare(workdir, context.request, ids)
            return self._spawn(bwrap, workdir, context, ids)
        finally:
            workdirs.remove(top)

    def _prepare(self, workdir: Path, request: RunRequest, ids: tuple[int, int] | None) -> None:
        files: dict[str, bytes | str] = dict(request.files)
        if request.code is not None and request.language is not None:
            files[SCRIPT_NAME[request.language]] = request.code
        (workdir / OUT_DIR).mkdir()
        for name, content in files.items():
            target = workdir / safe_relative_path(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = content.encode("utf-8") if isinstance(content, str) else content
            target.write_bytes(data)
        if ids is not None:
            for directory, subdirs, names in os.walk(workdir):
                os.chown(directory, *ids)
                for name in [*subdirs, *names]:
                    os.chown(os.path.join(directory, name), *ids, follow_symlinks=False)

    def _spawn(
        self, bwrap: str, workdir: Path, context: RunContext, ids: tuple[int, int] | None
    ) -> RawRun:
        request = context.request
        limits = _rlimits(request.limits)
        cgroup = PidsCgroup(context.run_id, request.limits.processes, ids[0] if ids else None)

        def preexec() -> None:  # runs in the child after dropping to the sandbox uid
            cgroup.join()
            for which, values in limits:
                resource.setrlimit(which, values)

        stdout = CappedBuffer(request.limits.output_cap_bytes)
        stderr = CappedBuffer(request.limits.output_cap_bytes)
        context.outputs = (stdout, stderr)
        extra: dict[str, Any] = {"user": ids[0], "group": ids[1], "extra_groups": []} if ids else {}
        with seccomp.filter_fd() as seccomp_fd:
            process = subprocess.Popen(
                bwrap_argv(bwrap, workdir, request, seccomp_fd), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/",
                env={"PATH": SANDBOX_PATH}, start_new_session=True, close_fds=True,
                pass_fds=(seccomp_fd,), preexec_fn=preexec, **extra,
            )  # fmt: skip
        try:
            context.report_started(process.pid, cgroup_pids=cgroup.path is not None)
            timed_out, cancelled = self._pump(process, context, stdout, stderr)
        finally:
            _kill_group(process)
            cgroup.remove()
        returncode = process.returncode
        reason = _kill_reason(returncode, timed_out, cancelled)
        exit_code = 128 - returncode if returncode < 0 else returncode
        files = collect_files(workdir, request.collect, OUT_DIR, request.limits.files_out_bytes)
        return RawRun(
            exit_code=exit_code, stdout=stdout, stderr=stderr, files=files,
            timed_out=timed_out, killed=reason is not None, kill_reason=reason,
        )  # fmt: skip

    def _pump(
        self,
        process: subprocess.Popen[bytes],
        context: RunContext,
        stdout: CappedBuffer,
        stderr: CappedBuffer,
    ) -> tuple[bool, bool]:
        """Read both pipes until EOF, enforcing the wall clock and cancellation."""
        assert process.stdout is not None and process.stderr is not None
        deadline = time.monotonic() + context.request.timeout_seconds
        selector = selectors.DefaultSelector()
        selector.register(process.stdout, selectors.EVENT_READ, stdout)
        selector.register(process.stderr, selectors.EVENT_READ, stderr)
        timed_out = cancelled = False
        with selector:
            while selector.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0 and not timed_out:
                    timed_out = True
                    _kill_group(process, grace=0)
                if context.cancelled.is_set() and not cancelled:
                    cancelled = True
                    _kill_group(process)
                for key, _ in selector.select(timeout=max(0.0, min(remaining, 0.25))):
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        key.data.write(chunk)
                    else:
                        selector.unregister(key.fileobj)
        while process.poll() is None:
            if time.monotonic() > deadline and not timed_out:
                timed_out = True
                _kill_group(process, grace=0)
            if context.cancelled.is_set() and not cancelled:
                cancelled = True
                _kill_group(process)
            time.sleep(0.02)
        return timed_out, cancelled


def _kill_reason(returncode: int, timed_out: bool, cancelled: bool) -> KillReason | None:
    if timed_out:
        return "timeout"
    if cancelled:
        return "supervisor"
    if returncode < 0:
        return "supervisor"  # bwrap itself was signalled from outside: sandboxes.kill
    if returncode == 128 + signal.SIGXCPU or returncode == 128 + signal.SIGKILL:
        return "cpu_limit" if returncode == 128 + signal.SIGXCPU else "signal"
    if returncode == 128 + signal.SIGXFSZ:
        return "file_size_limit"
    return None


def _kill_group(process: subprocess.Popen[bytes], grace: float = KILL_GRACE_SECONDS) -> None:
    """Stop the run's whole tree (see :func:`sandboxes.proctree.terminate_run`) and reap bwrap."""
    if process.poll() is not None:
        return
    terminate_run(process.pid, grace)
    process.wait()
