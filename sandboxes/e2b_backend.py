"""The E2B sandbox: the same protocol over the official ``e2b`` SDK (a remote microVM).

Create (or connect to and resume) a sandbox, upload the files, run the command with
``commands.run`` under ``ulimit`` for the same limits, stream output into the same caps, read
``out/`` back, kill the sandbox. Network access is turned off at creation. Chosen when
``E2B_API_KEY`` is set or by configuration. Tested here against a local stand-in of envd (the
SDK's debug mode); E2B's cloud itself is not reachable from the test machines.
"""

from __future__ import annotations

import math
import os
import shlex
import threading
from typing import Any

from sandboxes.base import OUT_DIR, RawRun, RunContext, Sandbox
from sandboxes.capture import CappedBuffer, FilesOut
from sandboxes.errors import SandboxUnavailable
from sandboxes.events import RunLedger, RunSink
from sandboxes.models import Limits, RunRequest

SCRIPT = {"python": (".supervisor_main.py", "python3"), "bash": (".supervisor_main.sh", "bash"),
          "sh": (".supervisor_main.sh", "sh")}  # fmt: skip


def ulimit_prefix(limits: Limits) -> str:
    """Shell ``ulimit`` settings applying ``limits`` inside the remote sandbox."""
    return (
        f"ulimit -t {limits.cpu_seconds} -v {limits.memory_bytes // 1024} "
        f"-f {max(1, limits.file_size_bytes // 1024)} -n {limits.open_files} "
        f"-u {limits.processes}"
    )


def remote_command(request: RunRequest) -> str:
    """The shell command run in the sandbox's work directory."""
    if request.argv is not None:
        program = shlex.join(request.argv)
    else:
        assert request.language is not None
        script, interpreter = SCRIPT[request.language]
        program = f"{interpreter} {script}"
    return f"mkdir -p {OUT_DIR} && {ulimit_prefix(request.limits)} && exec {program}"


class E2BSandbox(Sandbox):
    """Runs code in an E2B cloud sandbox.

    Args:
        ledger: Where runs are recorded; optional.
        sinks: More event sinks.
        template: E2B template (default: the SDK's default).
        api_key: E2B API key (default: ``E2B_API_KEY``).
        sandbox_id: Reuse (and resume) this sandbox instead of creating one per run; the
            timeout is re-applied with ``set_timeout`` after connecting.
        lifetime_seconds: Sandbox lifetime, at least the run's timeout plus a minute.
        workdir_root: Where per-run work directories are made inside the sandbox.
        connection: Extra SDK connection options (``domain``, ``debug``, ``sandbox_url``...).
    """

    name = "e2b"

    def __init__(
        self,
        *,
        ledger: RunLedger | None = None,
        sinks: tuple[RunSink, ...] | list[RunSink] = (),
        template: str | None = None,
        api_key: str | None = None,
        sandbox_id: str | None = None,
        lifetime_seconds: int = 300,
        workdir_root: str = "/home/user",
        connection: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(ledger=ledger, sinks=sinks)
        self.template = template
        self.api_key = api_key
        self.sandbox_id = sandbox_id
        self.lifetime_seconds = lifetime_seconds
        self.workdir_root = workdir_root.rstrip("/")
        self.connection = dict(connection or {})

    def check_available(self) -> None:
        """Refuse unless the SDK is installed and a key (or debug connection) is configured.

        Raises:
            SandboxUnavailable: With how to fix it.
        """
        try:
            import e2b  # noqa: F401
        except ImportError as exc:
            raise SandboxUnavailable(
                "The e2b SDK is not installed.", hint="pip install 'e2b>=2'"
            ) from exc
        debug = self.connection.get("debug") or os.environ.get("E2B_DEBUG", "").lower() == "true"
        if not (debug or self.api_key or os.environ.get("E2B_API_KEY")):
            raise SandboxUnavailable(
                "The e2b backend needs an API key.",
                hint="Set E2B_API_KEY (https://e2b.dev/dashboard) or use --backend local.",
            )

    def _options(self) -> dict[str, Any]:
        options = dict(self.connection)
        if self.api_key:
            options["api_key"] = self.api_key
        return options

    def execute(self, context: RunContext) -> RawRun:
        """Run the request in a remote sandbox (created for the run unless reusing one)."""
        from e2b import Sandbox as SdkSandbox

        request = context.request
        lifetime = max(self.lifetime_seconds, math.ceil(request.timeout_seconds) + 60)
        if self.sandbox_id:
            remote = SdkSandbox.connect(self.sandbox_id, timeout=lifetime, **self._options())
            remote.set_timeout(lifetime)  # a resumed sandbox starts with its old timeout
        else:
            remote = SdkSandbox.create(template=self.template, timeout=lifetime,
                                       allow_internet_access=False, **self._options())  # fmt: skip
        try:
            return self._run(remote, context)
        finally:
            if not self.sandbox_id:
                remote.kill()

    def _run(self, remote: Any, context: RunContext) -> RawRun:
        from e2b import CommandExitException, TimeoutException

        request = context.request
        workdir = f"{self.workdir_root}/supervisor-run-{context.run_id[:12]}"
        remote.files.make_dir(f"{workdir}/{OUT_DIR}")
        uploads: dict[str, bytes | str] = dict(request.files)
        if request.code is not None and request.language is not None:
            uploads[SCRIPT[request.language][0]] = request.code
        for name, content in uploads.items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            remote.files.write(f"{workdir}/{name}", data, use_octet_stream=True)
        stdout = CappedBuffer(request.limits.output_cap_bytes)
        stderr = CappedBuffer(request.limits.output_cap_bytes)
        context.outputs = (stdout, stderr)
        handle = remote.commands.run(
            remote_command(request), background=True, cwd=workdir, envs=dict(request.env),
            timeout=request.timeout_seconds, retain_output=False,
        )  # fmt: skip
        context.command = f"{request.describe()} [e2b:{remote.sandbox_id}]"
        context.report_started(None, e2b_sandbox_id=remote.sandbox_id, remote_pid=handle.pid)
        finished = threading.Event()
        watcher = threading.Thread(target=_kill_on_cancel, daemon=True,
                                   args=(context, handle, finished))  # fmt: skip
        watcher.start()
        timed_out = False
        exit_code: int | None = None
        try:
            result = handle.wait(on_stdout=lambda text: stdout.write(text.encode()),
                                 on_stderr=lambda text: stderr.write(text.encode()))  # fmt: skip
            exit_code = result.exit_code
        except CommandExitException as exc:
            exit_code = exc.exit_code
        except TimeoutException:
            timed_out = True
            handle.kill()
        finally:
            finished.set()
        cancelled = context.cancelled.is_set()
        killed = timed_out or cancelled
        if killed and (exit_code is None or exit_code == 0):
            exit_code = 137
        files = self._collect(remote, workdir, request)
        return RawRun(
            exit_code=exit_code, stdout=stdout, stderr=stderr, files=files, timed_out=timed_out,
            killed=killed,
            kill_reason="timeout" if timed_out else ("supervisor" if cancelled else None),
        )  # fmt: skip

    def _collect(self, remote: Any, workdir: str, request: RunRequest) -> FilesOut:
        files = FilesOut()
        budget = request.limits.files_out_bytes
        wanted = list(request.collect)
        try:
            entries = remote.files.list(f"{workdir}/{OUT_DIR}", depth=8)
        except Exception as exc:  # a missing out/ dir surfaces as an SDK error of some kind
            files.skipped.append(f"{OUT_DIR}/ (unlisted: {type(exc).__name__})")
            entries = []
        for entry in entries:
            if str(getattr(entry.type, "value", entry.type)) == "file":
                wanted.append(entry.path.removeprefix(f"{workdir}/"))
        for relative in dict.fromkeys(wanted):
            try:
                content = bytes(remote.files.read(f"{workdir}/{relative}", format="bytes"))
            except Exception:  # not found or unreadable: reported, not fatal
                files.skipped.append(f"{relative} (missing)")
                continue
            if len(content) > budget:
                files.skipped.append(f"{relative} (over the files-out budget)")
                continue
            budget -= len(content)
            files.files[relative] = content
        return files


def _kill_on_cancel(context: RunContext, handle: Any, finished: threading.Event) -> None:
    while not finished.is_set():
        if context.cancelled.wait(0.1):
            handle.kill()
            return
