"""The one path every sandbox run takes: settings -> backend -> ``Sandbox.run``.

The governed tools (``run_code``, ``run_command``) and the operator's
``supervisor sandbox exec`` both call :func:`run_in_sandbox`, so an approved tool call and an
operator command get exactly the same isolation, limits, records and refusals.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from sandboxes.base import get_backend
from sandboxes.events import RunLedger, RunSink
from sandboxes.models import Limits, RunResult, parse_request


@dataclass(frozen=True)
class SandboxSettings:
    """Which backend runs code, with which limits, recorded where.

    Attributes:
        backend: ``local`` or ``e2b``; None means :func:`sandboxes.base.default_backend_name`.
        limits: Resource limits of every run.
        timeout_seconds: Wall-clock limit of every run.
        ledger: Where runs are recorded; None means the default ledger (``SUPERVISOR_DB`` or
            the user data directory), opened on first run.
        backend_options: Extra constructor options of the backend (e.g. E2B connection).
    """

    backend: str | None = None
    limits: Limits = field(default_factory=Limits)
    timeout_seconds: float = 30.0
    ledger: RunLedger | None = None
    backend_options: dict[str, Any] = field(default_factory=dict)

    def with_changes(self, **changes: Any) -> SandboxSettings:
        """A copy with some fields replaced (None values are ignored)."""
        return replace(self, **{key: value for key, value in changes.items() if value is not None})

    def resolved_backend(self) -> str:
        """The backend name these settings run on."""
        from sandboxes.base import default_backend_name

        return self.backend or default_backend_name()

    def execution_target(self) -> dict[str, Any]:
        """What an approval binds besides the arguments: backend, limits and timeout."""
        return {
            "backend": self.resolved_backend(),
            "limits": self.limits.model_dump(),
            "timeout_seconds": self.timeout_seconds,
        }


def default_ledger() -> RunLedger:
    """The default ledger (``SUPERVISOR_DB`` or the user data directory)."""
    from supervisor.store.provider import SQLModelProvider

    return SQLModelProvider().ledger


def run_in_sandbox(
    settings: SandboxSettings,
    *,
    language: str | None = None,
    code: str | None = None,
    argv: list[str] | tuple[str, ...] | None = None,
    files: dict[str, bytes | str] | None = None,
    actor: str = "agent",
    sinks: tuple[RunSink, ...] = (),
) -> RunResult:
    """Build a request from ``settings`` and run it on the configured backend.

    Args:
        settings: Backend, limits, timeout and ledger.
        language: Interpreter of ``code``.
        code: Source to run (with ``language``).
        argv: Command to run (instead of code).
        files: Files placed in the work directory first.
        actor: ``agent`` or ``operator`` (kept in the trace).
        sinks: More event sinks.

    Returns:
        The run's result.

    Raises:
        SandboxUnavailable: Isolation is unavailable (nothing ran).
        InvalidRunRequest: The request contradicts itself.
    """
    request = parse_request(
        {
            "language": language,
            "code": code,
            "argv": tuple(argv) if argv is not None else None,
            "files": dict(files or {}),
            "timeout_seconds": settings.timeout_seconds,
            "limits": settings.limits,
        }
    )
    ledger = settings.ledger if settings.ledger is not None else default_ledger()
    sandbox = get_backend(
        settings.resolved_backend(), ledger=ledger, sinks=sinks, **settings.backend_options
    )
    return sandbox.run(request, actor=actor)
