"""Governed tools that run code in the sandbox: ``run_code`` and ``run_command``.

Both require approval for every call. Each tool carries an ``execution_target`` (backend,
limits, timeout) that the runtime puts in the proposal and in the args hash, so an approval of
``print(1)`` on the local sandbox with these limits never authorises another backend or looser
limits. :func:`configure_sandbox_tools` changes the settings and the target together.
"""

from __future__ import annotations

from typing import Any, Literal

from sandboxes.models import Limits, RunResult
from sandboxes.runner import SandboxSettings, run_in_sandbox
from supervisor.tools.governed import governed_tool

PREVIEW_CHARS = 8000
FILE_PREVIEW_CHARS = 4000


class _Settings:
    """The settings the two tools run with (one holder, replaced by configure)."""

    current = SandboxSettings()


def configure_sandbox_tools(
    *,
    backend: str | None = None,
    limits: Limits | None = None,
    timeout_seconds: float | None = None,
    ledger: Any = None,
    backend_options: dict[str, Any] | None = None,
) -> SandboxSettings:
    """Choose the backend, limits, timeout and ledger of ``run_code`` and ``run_command``.

    Args:
        backend: ``local`` or ``e2b`` (default: E2B when ``E2B_API_KEY`` is set, else local).
        limits: Resource limits of every run.
        timeout_seconds: Wall-clock limit of every run.
        ledger: Where runs are recorded (default: ``SQLModelProvider().ledger``).
        backend_options: Extra backend constructor options.

    Returns:
        The new settings (their ``execution_target()`` is now on both tools).
    """
    _Settings.current = _Settings.current.with_changes(
        backend=backend, limits=limits, timeout_seconds=timeout_seconds, ledger=ledger,
        backend_options=backend_options,
    )  # fmt: skip
    target = _Settings.current.execution_target()
    run_code.execution_target = target
    run_command.execution_target = target
    return _Settings.current


def current_settings() -> SandboxSettings:
    """The settings the tools run with now."""
    return _Settings.current


def result_for_model(result: RunResult) -> dict[str, Any]:
    """A bounded JSON view of a run for the model; full output stays in the ledger blobs."""
    files: dict[str, Any] = {}
    for name, content in result.files.items():
        text = content[: FILE_PREVIEW_CHARS * 4].decode("utf-8", errors="replace")
        files[name] = {"size": len(content), "preview": text[:FILE_PREVIEW_CHARS]}
    return {
        "ok": result.ok,
        "exit_code": result.exit_code,
        "stdout": result.stdout[:PREVIEW_CHARS],
        "stderr": result.stderr[:PREVIEW_CHARS],
        "stdout_bytes": result.stdout_bytes,
        "stderr_bytes": result.stderr_bytes,
        "stdout_truncated": result.stdout_truncated or len(result.stdout) > PREVIEW_CHARS,
        "stderr_truncated": result.stderr_truncated or len(result.stderr) > PREVIEW_CHARS,
        "stdout_blob": result.stdout_blob,
        "stderr_blob": result.stderr_blob,
        "timed_out": result.timed_out,
        "killed": result.killed,
        "kill_reason": result.kill_reason,
        "files": files,
        "files_skipped": list(result.files_skipped),
        "duration_seconds": result.duration_seconds,
        "backend": result.backend,
        "process_id": result.process_id,
    }


@governed_tool(
    side_effects=True, requires_approval=True, deterministic=False, domains=("sandbox",),
    approval_reason="runs the exact code shown in an isolated sandbox",
)  # fmt: skip
def run_code(
    language: Literal["python", "bash"],
    code: str,
    files: dict[str, str] = {},  # noqa: B006 - never mutated; the schema shows the default
) -> dict[str, Any]:
    """Run a program in an isolated sandbox (no network, limited CPU, memory and time).

    Files written to ``out/`` are returned.

    Args:
        language: ``python`` (Python 3 standard library only) or ``bash``.
        code: The complete program.
        files: Input files placed in the working directory first (relative name -> text).
    """
    result = run_in_sandbox(_Settings.current, language=language, code=code, files=dict(files))
    return result_for_model(result)


@governed_tool(
    side_effects=True, requires_approval=True, deterministic=False, domains=("sandbox",),
    approval_reason="runs the exact command shown in an isolated sandbox",
)  # fmt: skip
def run_command(argv: list[str]) -> dict[str, Any]:
    """Run one command in an isolated sandbox (no network, limited CPU, memory and time).

    Args:
        argv: The command and its arguments, e.g. ``["ls", "-la"]`` (no shell).
    """
    result = run_in_sandbox(_Settings.current, argv=list(argv))
    return result_for_model(result)


run_code.execution_target = _Settings.current.execution_target()
run_command.execution_target = _Settings.current.execution_target()
