"""Start, follow and stop supervised agent runs (``supervisor run``) from a supervisor.

A run is a subprocess in its own process group writing stdout and stderr to a log file (the
path is recorded in the process table's command as ``--log PATH``). Stopping sends SIGTERM to
the group, waits a grace period, then SIGKILL; the ledger ends up with status ``stopped`` and
the exit code either way. Only processes on this host can be signalled.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from supervisor.errors import SupervisorError
from supervisor.ledger.models import ProcessRecord
from supervisor.ledger.service import ApprovalLedger

TAIL_LIMIT = 256 * 1024
FINISHED = ("exited", "stopped")


class ProcessControlError(SupervisorError):
    """A run cannot be started or stopped (unknown id, another host, no console script)."""

    code = "process_control_failed"


@dataclass(frozen=True)
class StartedRun:
    """A run this supervisor spawned."""

    process_id: str
    pid: int
    log_path: Path
    argv: tuple[str, ...]


@dataclass(frozen=True)
class StopReport:
    """How a stop went: the last signal sent and the exit code recorded."""

    process_id: str
    signal_name: str
    exit_code: int | None


def log_folder(db_url: str | None) -> Path:
    """``logs/`` beside a SQLite ledger file, else a temporary folder."""
    if db_url:
        url = make_url(db_url)
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            return Path(str(url.database)).resolve().parent / "logs"
    return Path(tempfile.gettempdir()) / "agent-supervisor-logs"


def log_path_of(process: ProcessRecord) -> Path | None:
    """Where a process logs: the path it recorded, else a ``--log PATH`` in its command."""
    if process.log_path:
        return Path(process.log_path)
    try:
        words = shlex.split(process.command)
    except ValueError:
        return None
    for flag, value in itertools.pairwise(words):
        if flag == "--log":
            return Path(value)
    return None


def read_tail(path: Path, offset: int, limit: int = TAIL_LIMIT) -> tuple[str, int]:
    """Text appended to ``path`` since ``offset`` (at most ``limit`` bytes) and the new offset.

    A file that shrank (rotated or truncated) is read again from the start.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "", offset
    if size < offset:
        offset = 0
    with path.open("rb") as handle:
        handle.seek(offset)
        chunk = handle.read(limit)
    return chunk.decode("utf-8", errors="replace"), offset + len(chunk)


@dataclass(frozen=True)
class _Standby:
    """A warm ``supervisor resume --standby`` waiting on its stdin for a proposal id."""

    process_id: str
    child: subprocess.Popen[bytes]
    log_path: Path
    argv: tuple[str, ...]


def _supervisor_command() -> list[str]:
    beside = Path(sys.executable).parent / "supervisor"
    found = str(beside) if beside.exists() else shutil.which("supervisor")
    if found is None:
        raise ProcessControlError(
            "The supervisor command is not installed beside this Python.",
            hint="Install the package (pip install -e .) in this environment.",
        )
    return [found]


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs: an exited process its parent has not reaped yet (a zombie,
    e.g. a run started by another program) has ended."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


class ProcessControl:
    """Spawns and stops ``supervisor run`` / ``resume`` subprocesses; their state is in the ledger.

    Args:
        ledger: The shared ledger (the runs record themselves in it).
        db_url: The ledger URL passed to the runs (``None``: their default ledger).
        logs: Folder for run logs (default: :func:`log_folder`).
        env: Extra environment for the runs (e.g. a model endpoint or PYTHONPATH).
    """

    def __init__(
        self,
        ledger: ApprovalLedger,
        db_url: str | None,
        *,
        logs: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.ledger = ledger
        self.db_url = db_url
        self.logs = logs or log_folder(db_url)
        self.env = dict(env or {})
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._standby: _Standby | None = None
        self._standby_lock = threading.Lock()  # workers prepare and take it from two threads

    def start_run(self, reference: str, text: str, thread_id: str | None = None) -> StartedRun:
        """Spawn ``supervisor run REFERENCE --input TEXT`` with its output in a log file."""
        if ":" not in reference:
            raise ProcessControlError(f"{reference!r} is not MODULE:FACTORY.")
        process_id = f"run-{uuid.uuid4().hex[:12]}"
        self.logs.mkdir(parents=True, exist_ok=True)
        log_path = self.logs / f"{process_id}.log"
        argv = [*_supervisor_command(), "run", reference, "--input", text]
        argv += ["--process-id", process_id, "--log", str(log_path)]
        if thread_id:
            argv += ["--thread", thread_id]
        if self.db_url:
            argv += ["--db", self.db_url]
        return self._spawn(process_id, argv, log_path)

    def _resume_argv(self, process_id: str, log_path: Path, *first: str) -> list[str]:
        argv = [*_supervisor_command(), "resume", *first]
        argv += ["--process-id", process_id, "--log", str(log_path)]
        if self.db_url:
            argv += ["--db", self.db_url]
        return argv

    def prepare_resume(self) -> None:
        """Keep one ``supervisor resume --standby`` warm (imported, ledger open), if none is.

        Starting Python and importing the runtime costs most of a resume's first second; a
        standby has paid it, so :meth:`start_resume` hands it the proposal and it claims the
        call at once. Called when an orphan appears; :meth:`close` ends an unused standby.
        """
        with self._standby_lock:
            if self._standby is not None and self._standby.child.poll() is None:
                return
            process_id = f"resume-{uuid.uuid4().hex[:12]}"
            self.logs.mkdir(parents=True, exist_ok=True)
            log_path = self.logs / f"{process_id}.log"
            argv = self._resume_argv(process_id, log_path, "--standby")
            with log_path.open("ab") as log:
                child = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, env={**os.environ, **self.env},
                )  # fmt: skip
            self._standby = _Standby(process_id, child, log_path, tuple(argv))

    def _take_standby(self) -> _Standby | None:
        with self._standby_lock:
            standby, self._standby = self._standby, None
        return standby

    def check_resume(self, proposal_id: str) -> None:
        """Refuse, before any decision, a resume that could not re-create the agent.

        Reads the ledger and the operator's allowlist; imports nothing.

        Raises:
            NotResumable: The agent is not saved or its factory or tools are not allowlisted
                (the message says which and how to fix it).
        """
        from supervisor.runtime.allowlist import effective_allowlist
        from supervisor.runtime.restart import check_rebuildable

        check_rebuildable(self.ledger, self.ledger.get(proposal_id), effective_allowlist())

    def start_resume(self, proposal_id: str) -> StartedRun:
        """Run ``supervisor resume PROPOSAL_ID`` (an orphan's run, driven to its end).

        A warm standby (:meth:`prepare_resume`) takes it when one is alive; otherwise a new
        process is spawned.
        """
        standby = self._take_standby()
        if standby is not None and standby.child.poll() is None and standby.child.stdin:
            try:
                standby.child.stdin.write(f"{proposal_id}\n".encode())
                standby.child.stdin.close()
            except OSError:
                standby.child.kill()  # it died meanwhile: spawn one below
            else:
                self._children[standby.process_id] = standby.child
                return StartedRun(
                    standby.process_id, standby.child.pid, standby.log_path,
                    (*standby.argv, proposal_id),
                )  # fmt: skip
        process_id = f"resume-{uuid.uuid4().hex[:12]}"
        self.logs.mkdir(parents=True, exist_ok=True)
        log_path = self.logs / f"{process_id}.log"
        return self._spawn(
            process_id, self._resume_argv(process_id, log_path, proposal_id), log_path
        )

    def close(self) -> None:
        """End an unused standby (closing its stdin tells it there is no work)."""
        standby = self._take_standby()
        if standby is None:
            return
        if standby.child.stdin is not None:
            with contextlib.suppress(OSError):
                standby.child.stdin.close()
        try:
            standby.child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            standby.child.kill()
            standby.child.wait(timeout=5)

    def _spawn(self, process_id: str, argv: list[str], log_path: Path) -> StartedRun:
        with log_path.open("ab") as log:
            child = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, env={**os.environ, **self.env},
            )  # fmt: skip
        self._children[process_id] = child
        return StartedRun(process_id, child.pid, log_path, tuple(argv))

    def child(self, process_id: str) -> subprocess.Popen[bytes]:
        """The subprocess this control spawned as ``process_id`` (KeyError if none)."""
        return self._children[process_id]

    def find(self, process_id: str) -> ProcessRecord:
        """The process row, or :class:`ProcessControlError` when there is none."""
        for process in self.ledger.list_processes():
            if process.process_id == process_id:
                return process
        raise ProcessControlError(f"No process {process_id} in the ledger.")

    def reap(self) -> None:
        """Collect children that exited by themselves (no zombies)."""
        for process_id, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[process_id]

    def _wait(self, process_id: str, pid: int, seconds: float) -> int | None:
        """Wait for the process to end; its exit code when it is our child, else ``None``."""
        child = self._children.get(process_id)
        if child is not None:
            try:
                return child.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                return None
        deadline = time.monotonic() + seconds
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        return None

    def stop(self, process_id: str, grace: float = 5.0) -> StopReport:
        """SIGTERM the run's process group, SIGKILL after ``grace`` seconds, record the end.

        Raises:
            ProcessControlError: Unknown process, no pid, or it runs on another host.
        """
        record = self.find(process_id)
        if record.pid is None or record.host != socket.gethostname():
            raise ProcessControlError(
                f"{process_id} runs on {record.host or 'an unknown host'}; stop it there."
            )
        pid = record.pid
        if record.status in FINISHED and not _alive(pid):
            return StopReport(process_id, "none", record.exit_code)
        group = pid if os.getpgid(pid) == pid else None

        def send(sig: signal.Signals) -> None:
            try:
                if group is not None:
                    os.killpg(group, sig)
                else:
                    os.kill(pid, sig)
            except ProcessLookupError:
                return

        send(signal.SIGTERM)
        sent = "SIGTERM"
        code = self._wait(process_id, pid, grace)
        child = self._children.get(process_id)
        ended = child.poll() is not None if child is not None else not _alive(pid)
        if not ended:
            send(signal.SIGKILL)
            sent = "SIGKILL"
            code = self._wait(process_id, pid, 5.0)
        self._children.pop(process_id, None)
        after = self.find(process_id)
        if after.status == "stopped" and after.exit_code is not None:
            return StopReport(process_id, sent, after.exit_code)
        recorded = code if code is not None else 128 + (9 if sent == "SIGKILL" else 15)
        self.ledger.heartbeat(process_id, status="stopped", exit_code=recorded)
        return StopReport(process_id, sent, recorded)
