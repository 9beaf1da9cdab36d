"""The data a sandbox run takes and gives back: limits, the request, the result."""

from __future__ import annotations

import hashlib
import posixpath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sandboxes.errors import InvalidRunRequest

Language = Literal["python", "bash", "sh"]
KillReason = Literal[
    "timeout", "cpu_limit", "file_size_limit", "output_limit", "supervisor", "signal"
]

MiB = 1024 * 1024
#: The directory whose files every run returns; a file of that name would shadow it.
OUT_DIR = "out"
#: Where the backends write ``code`` before running it.
SCRIPT_PREFIX = ".supervisor_main"


class Limits(BaseModel):
    """Resource limits of one run (per sandbox process unless said otherwise).

    Attributes:
        cpu_seconds: CPU time of each process (RLIMIT_CPU; SIGXCPU then SIGKILL).
        memory_bytes: Address space of each process (RLIMIT_AS).
        file_size_bytes: Largest file a process may write (RLIMIT_FSIZE).
        open_files: Open file descriptors per process (RLIMIT_NOFILE).
        processes: Processes of the sandbox user (RLIMIT_NPROC; cgroup ``pids.max`` too where
            available).
        output_cap_bytes: Bytes of stdout and of stderr kept; the rest is counted and dropped.
        files_out_bytes: Total bytes of files returned from the run.
        tmp_bytes: Size of the private in-memory ``/tmp``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpu_seconds: int = Field(default=10, ge=1)
    memory_bytes: int = Field(default=1024 * MiB, ge=16 * MiB)
    file_size_bytes: int = Field(default=64 * MiB, ge=0)
    open_files: int = Field(default=256, ge=16)
    processes: int = Field(default=64, ge=4)
    output_cap_bytes: int = Field(default=1 * MiB, ge=1024)
    files_out_bytes: int = Field(default=16 * MiB, ge=0)
    tmp_bytes: int = Field(default=64 * MiB, ge=1 * MiB)


class RunRequest(BaseModel):
    """One thing to run: ``code`` in a ``language``, or an ``argv``.

    Attributes:
        language: Interpreter for ``code`` (``python`` is the system ``/usr/bin/python3``).
        code: Source text, written to a file in the work directory and run from there.
        argv: A command and its arguments, resolved on the sandbox's ``PATH``.
        files: Files placed in the work directory first (relative name -> content).
        collect: Extra paths (relative to the work directory) returned after the run; every
            regular file under ``out/`` is returned as well.
        timeout_seconds: Wall-clock limit; the whole process group is killed when it passes.
        limits: Resource limits.
        env: Extra environment variables inside the sandbox.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    language: Language | None = None
    code: str | None = None
    argv: tuple[str, ...] | None = None
    files: dict[str, bytes | str] = Field(default_factory=dict)
    collect: tuple[str, ...] = ()
    timeout_seconds: float = Field(default=30.0, gt=0, le=24 * 3600)
    limits: Limits = Field(default_factory=Limits)
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> RunRequest:
        if (self.code is None) == (self.argv is None):
            raise InvalidRunRequest("A run needs exactly one of code or argv.")
        if self.code is not None and self.language is None:
            raise InvalidRunRequest("Code needs a language (python, bash or sh).")
        if self.argv is not None and not self.argv:
            raise InvalidRunRequest("argv is empty.")
        for name in (*self.files, *self.collect):
            safe_relative_path(name)
        _check_file_layout(tuple(self.files))
        return self

    def describe(self) -> str:
        """A one-line description for process lists (the command, or the language)."""
        if self.argv is not None:
            return " ".join(self.argv)[:200]
        return f"{self.language} code ({len(self.code or '')} chars)"

    def digest(self) -> str:
        """SHA-256 of exactly what runs (code or argv), for the trace."""
        text = self.code if self.code is not None else "\0".join(self.argv or ())
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RunResult(BaseModel):
    """What a run produced.

    Attributes:
        run_id: Id of the run (trace ``run_id``).
        process_id: Id of its process record.
        backend: Backend name.
        exit_code: Exit status (128 + signal when a signal ended it); None if it never started.
        stdout: Captured stdout (at most ``output_cap_bytes``, decoded leniently).
        stderr: Captured stderr (same cap).
        stdout_bytes: Total stdout bytes the run wrote, including those dropped.
        stderr_bytes: Total stderr bytes.
        stdout_truncated: Some stdout was dropped by the cap.
        stderr_truncated: Some stderr was dropped by the cap.
        stdout_blob: Ledger blob (sha256) of the captured stdout when it was large.
        stderr_blob: Ledger blob of the captured stderr when it was large.
        timed_out: The wall-clock timeout ended the run.
        killed: A limit or the supervisor ended the run with a signal.
        kill_reason: Why it was killed.
        files: Files returned (relative path -> bytes).
        files_skipped: Paths not returned (not regular files, links, over the size budget).
        duration_seconds: Wall-clock duration.
    """

    model_config = ConfigDict(frozen=True)

    run_id: str
    process_id: str
    backend: str
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_blob: str | None = None
    stderr_blob: str | None = None
    timed_out: bool = False
    killed: bool = False
    kill_reason: KillReason | None = None
    files: dict[str, bytes] = Field(default_factory=dict)
    files_skipped: tuple[str, ...] = ()
    duration_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """The run exited with status 0 and nothing killed it."""
        return self.exit_code == 0 and not self.killed


def _check_file_layout(names: tuple[str, ...]) -> None:
    """Input files must be placeable: distinct, no file where a directory goes, none reserved."""
    placed: dict[str, str] = {}
    for name in names:
        path = safe_relative_path(name)
        if path == OUT_DIR:
            raise InvalidRunRequest(
                f"Input file {name!r} collides with the {OUT_DIR}/ directory the sandbox returns.",
                hint=f"Rename it, or place it inside the directory: '{OUT_DIR}/{name}'.",
            )
        if path.split("/", 1)[0].startswith(SCRIPT_PREFIX):
            raise InvalidRunRequest(
                f"Input file {name!r} uses the name the sandbox keeps for the code it runs.",
                hint=f"Rename it (names starting with {SCRIPT_PREFIX!r} are reserved).",
            )
        if path in placed:
            raise InvalidRunRequest(
                f"Input files {placed[path]!r} and {name!r} name the same file.",
                hint="Give each input file one name.",
            )
        placed[path] = name
    for path, name in placed.items():
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent in placed:
                raise InvalidRunRequest(
                    f"Input file {placed[parent]!r} is also the directory of {name!r}.",
                    hint="Rename one of them: a path cannot be both a file and a directory.",
                )


def parse_request(fields: dict[str, object]) -> RunRequest:
    """Validate a run request, raising the typed error instead of pydantic's.

    Raises:
        InvalidRunRequest: The request contradicts itself or a field is out of range; the
            message names the field.
    """
    try:
        return RunRequest.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        original = first.get("ctx", {}).get("error")
        if isinstance(original, InvalidRunRequest):
            raise original from None
        where = ".".join(str(part) for part in first["loc"]) or "request"
        raise InvalidRunRequest(
            f"Invalid sandbox run: {where}: {first['msg']}.",
            hint="Fix that value and run again (ranges: sandboxes.models.RunRequest, Limits).",
        ) from None


def safe_relative_path(name: str) -> str:
    """Check that ``name`` is a plain relative path inside the work directory.

    Returns:
        The normalised path.

    Raises:
        InvalidRunRequest: ``name`` is empty, absolute, or climbs out with ``..``.
    """
    normalised = posixpath.normpath(name) if name else ""
    if (
        not normalised
        or normalised == "."
        or normalised.startswith("/")
        or normalised == ".."
        or normalised.startswith("../")
        or "\0" in normalised
    ):
        raise InvalidRunRequest(f"File name {name!r} must be a relative path inside the sandbox.")
    return normalised
