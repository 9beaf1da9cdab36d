"""One abstract ``Sandbox`` and a registry of backends (``local`` bubblewrap, ``e2b``).

``Sandbox.run`` is the one code path every caller uses (governed tools, the operator's
``supervisor sandbox exec``): it refuses when isolation is unavailable, emits started /
heartbeat / finished events to its sinks (the ledger's process table and trace, callbacks), keeps
large output as a ledger blob, and returns a :class:`RunResult`. Before each run it marks
process rows whose heartbeat stopped as ``lost`` (a SIGKILLed supervisor cannot say it ended).
"""

from __future__ import annotations

import importlib
import os
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sandboxes.capture import CappedBuffer, FilesOut
from sandboxes.errors import SandboxUnavailable, UnknownSandboxBackend
from sandboxes.events import LedgerSink, RunEvent, RunLedger, RunSink
from sandboxes.models import OUT_DIR as OUT_DIR  # re-exported: the backends import it here
from sandboxes.models import KillReason, RunRequest, RunResult
from supervisor.ledger.lease_time import lease_seconds_from_env, renew_every
from supervisor.ledger.models import PROCESS_HEARTBEAT_SECONDS

#: Captured output above this size is also stored as a ledger blob (the result points to it).
BLOB_THRESHOLD_BYTES = 64 * 1024
#: A running sandbox row's heartbeat interval; 12 missed ones make it ``lost``.
HEARTBEAT_SECONDS = PROCESS_HEARTBEAT_SECONDS
#: How often a run whose output grows reports its size (its progress) to the ledger.
PROGRESS_SECONDS = 1.0


@dataclass
class RawRun:
    """What a backend hands back to :meth:`Sandbox.run`."""

    exit_code: int | None
    stdout: CappedBuffer
    stderr: CappedBuffer
    files: FilesOut = field(default_factory=FilesOut)
    timed_out: bool = False
    killed: bool = False
    kill_reason: KillReason | None = None


class RunContext:
    """A run in progress, as a backend sees it: ids, cancellation and event reporting."""

    def __init__(
        self,
        sandbox: Sandbox,
        request: RunRequest,
        actor: str,
        on_started: Callable[[RunContext], None] | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.on_started = on_started
        self.request = request
        self.actor = actor
        self.run_id = uuid.uuid4().hex
        self.process_id = f"sandbox-{self.run_id[:16]}"
        self.cancelled = threading.Event()
        self.pid: int | None = None
        self.detail: dict[str, Any] = {}
        self.command = request.describe()
        self.started = False
        self._last_beat = 0.0
        self._beat_every = renew_every(lease_seconds_from_env(), HEARTBEAT_SECONDS)
        self._beat_lock = threading.Lock()
        self._stop_beats = threading.Event()
        self._beats: threading.Thread | None = None
        #: The run's output buffers, set by the backend: their sizes are its progress.
        self.outputs: tuple[CappedBuffer, ...] = ()
        self._reported_bytes = -1

    def report_started(self, pid: int | None, **detail: Any) -> None:
        """Record the process (pid on this host, or backend details) as running.

        From here until the run ends a background thread refreshes the heartbeat (and so the
        lease) every ``HEARTBEAT_SECONDS``, or a third of the lease when that is shorter,
        whatever the backend is doing (waiting on a quiet process, an SDK call), so only a dead
        supervisor lets the row go stale.
        """
        self.pid = pid
        self.detail.update(detail)
        self.started = True
        self._last_beat = time.monotonic()
        self.sandbox.emit(self.event("sandbox.started", status="running"))
        self._beats = threading.Thread(target=self._beat_until_stopped, daemon=True,
                                       name=f"heartbeat-{self.process_id}")  # fmt: skip
        self._beats.start()
        if self.on_started is not None:
            self.on_started(self)

    def output_bytes(self) -> int:
        """Bytes the run has written so far (all streams, kept or not)."""
        return sum(buffer.total for buffer in self.outputs)

    def heartbeat(self) -> None:
        """Refresh the process record's heartbeat and progress (throttled: every heartbeat
        interval, or every :data:`PROGRESS_SECONDS` while the output grows)."""
        with self._beat_lock:
            now = time.monotonic()
            if not self.started or self._stop_beats.is_set():
                return
            written = self.output_bytes()
            since = now - self._last_beat
            grew = written != self._reported_bytes and since >= PROGRESS_SECONDS
            if since < self._beat_every and not grew:
                return
            self._last_beat = now
            self._reported_bytes = written
            self.sandbox.emit(
                self.event("sandbox.heartbeat", status="running",
                           payload={"output_bytes": written})
            )  # fmt: skip

    def stop_heartbeats(self) -> None:
        """Stop the heartbeat thread (before the run's final event is written)."""
        self._stop_beats.set()
        if self._beats is not None and self._beats is not threading.current_thread():
            self._beats.join()

    def _beat_until_stopped(self) -> None:
        while not self._stop_beats.wait(min(self._beat_every / 5, PROGRESS_SECONDS)):
            try:
                self.heartbeat()
            except Exception:  # a ledger hiccup must not kill the beat; the next one retries
                continue

    def event(self, kind: Any, **fields: Any) -> RunEvent:
        """A :class:`RunEvent` of this run."""
        payload = {
            "digest": self.request.digest(),
            "limits": self.request.limits.model_dump(),
            "timeout_seconds": self.request.timeout_seconds,
            **self.detail,
            **fields.pop("payload", {}),
        }
        return RunEvent(
            kind=kind, run_id=self.run_id, process_id=self.process_id,
            backend=self.sandbox.name, pid=self.pid, command=self.command,
            actor=self.actor, payload=payload, **fields,
        )  # fmt: skip


class Sandbox(ABC):
    """A place to run untrusted code with limits. Subclasses implement one backend.

    Args:
        ledger: Where runs are recorded (process table, trace, large output); optional.
        sinks: More event sinks (callbacks).
    """

    name: ClassVar[str] = "abstract"

    def __init__(self, *, ledger: RunLedger | None = None, sinks: Sequence[RunSink] = ()) -> None:
        self.ledger = ledger
        self.sinks: list[RunSink] = [*([LedgerSink(ledger)] if ledger else []), *sinks]
        self._active: dict[str, RunContext] = {}
        self._lock = threading.Lock()

    @abstractmethod
    def check_available(self) -> None:
        """Prove that isolation works here.

        Raises:
            SandboxUnavailable: It does not; the message says how to fix it.
        """

    @abstractmethod
    def execute(self, context: RunContext) -> RawRun:
        """Run ``context.request``; call ``context.report_started`` once it is running."""

    def execution_target(self, request: RunRequest) -> dict[str, Any]:
        """What an approval of a run on this sandbox binds: backend, limits and timeout."""
        return {
            "backend": self.name,
            "limits": request.limits.model_dump(),
            "timeout_seconds": request.timeout_seconds,
        }

    def emit(self, event: RunEvent) -> None:
        """Send an event to every sink."""
        for sink in self.sinks:
            sink.emit(event)

    def cancel(self, process_id: str) -> bool:
        """Stop a run of this sandbox object (same process); True if it was running."""
        with self._lock:
            context = self._active.get(process_id)
        if context is None:
            return False
        context.cancelled.set()
        return True

    def run(
        self,
        request: RunRequest,
        *,
        actor: str = "agent",
        on_started: Callable[[RunContext], None] | None = None,
    ) -> RunResult:
        """Run one request under this sandbox's isolation and limits.

        Args:
            request: What to run.
            actor: Who asked (``agent`` or ``operator``), kept in the trace.
            on_started: Called with the context once the process record exists.

        Returns:
            The result (non-zero exit codes and kills are results, not errors).

        Raises:
            SandboxUnavailable: Isolation is not available; nothing ran.
        """
        context = RunContext(self, request, actor, on_started)
        if self.ledger is not None:
            self.ledger.mark_lost_processes()
        try:
            self.check_available()
        except SandboxUnavailable as exc:
            self.emit(context.event("sandbox.refused", status="refused",
                                    payload={"error": exc.to_dict()}))  # fmt: skip
            raise
        began = time.monotonic()
        with self._lock:
            self._active[context.process_id] = context
        try:
            raw = self.execute(context)
        except BaseException as exc:
            context.stop_heartbeats()
            self.emit(context.event("sandbox.finished", status="failed",
                                    payload={"error": repr(exc)[:500]}))  # fmt: skip
            raise
        finally:
            context.stop_heartbeats()
            with self._lock:
                self._active.pop(context.process_id, None)
        return self._finish(context, raw, time.monotonic() - began)

    def _finish(self, context: RunContext, raw: RawRun, duration: float) -> RunResult:
        stdout_blob = self._keep_blob(raw.stdout)
        stderr_blob = self._keep_blob(raw.stderr)
        status = "killed" if raw.killed else ("exited" if raw.exit_code == 0 else "failed")
        result = RunResult(
            run_id=context.run_id, process_id=context.process_id, backend=self.name,
            exit_code=raw.exit_code,
            stdout=raw.stdout.getvalue().decode("utf-8", errors="replace"),
            stderr=raw.stderr.getvalue().decode("utf-8", errors="replace"),
            stdout_bytes=raw.stdout.total, stderr_bytes=raw.stderr.total,
            stdout_truncated=raw.stdout.truncated, stderr_truncated=raw.stderr.truncated,
            stdout_blob=stdout_blob, stderr_blob=stderr_blob,
            timed_out=raw.timed_out, killed=raw.killed, kill_reason=raw.kill_reason,
            files=raw.files.files, files_skipped=tuple(raw.files.skipped),
            duration_seconds=round(duration, 3),
        )  # fmt: skip
        self.emit(
            context.event(
                "sandbox.finished", status=status, exit_code=raw.exit_code,
                payload={
                    "timed_out": raw.timed_out, "killed": raw.killed,
                    "kill_reason": raw.kill_reason, "duration_seconds": result.duration_seconds,
                    "stdout_bytes": raw.stdout.total, "stderr_bytes": raw.stderr.total,
                    "stdout_blob": stdout_blob, "stderr_blob": stderr_blob,
                    "files_out": sorted(result.files), "files_skipped": list(result.files_skipped),
                },
            )
        )  # fmt: skip
        return result

    def _keep_blob(self, buffer: CappedBuffer) -> str | None:
        content = buffer.getvalue()
        if self.ledger is None or len(content) <= BLOB_THRESHOLD_BYTES:
            return None
        return self.ledger.put_blob(content, "text/plain").sha256


#: Backend name -> "module:Class"; imported on first use so e2b loads only when chosen.
BACKENDS: dict[str, str] = {
    "local": "sandboxes.local:BubblewrapSandbox",
    "e2b": "sandboxes.e2b_backend:E2BSandbox",
}


def default_backend_name() -> str:
    """``$SUPERVISOR_SANDBOX_BACKEND``, else ``e2b`` when ``E2B_API_KEY`` is set, else ``local``."""
    configured = os.environ.get("SUPERVISOR_SANDBOX_BACKEND", "").strip()
    if configured:
        return configured
    return "e2b" if os.environ.get("E2B_API_KEY") else "local"


def get_backend(name: str | None = None, **options: Any) -> Sandbox:
    """Create a sandbox of the named backend (default: :func:`default_backend_name`).

    Args:
        name: ``local``, ``e2b`` or another registered name.
        **options: Passed to the backend's constructor (``ledger=``, ``sinks=``...).

    Returns:
        The sandbox.

    Raises:
        UnknownSandboxBackend: No such backend.
    """
    chosen = name or default_backend_name()
    reference = BACKENDS.get(chosen)
    if reference is None:
        raise UnknownSandboxBackend(
            f"No sandbox backend named {chosen!r}.", hint=f"Use one of: {', '.join(BACKENDS)}."
        )
    module_name, _, attribute = reference.partition(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    sandbox = factory(**options)
    assert isinstance(sandbox, Sandbox)
    return sandbox
