"""Typed errors of the code sandboxes; each has a stable ``code`` and says how to fix it."""

from __future__ import annotations

from supervisor.errors import SupervisorError


class SandboxError(SupervisorError):
    """Base of the sandbox errors."""

    code = "sandbox_error"


class SandboxUnavailable(SandboxError, RuntimeError):
    """Isolation cannot be set up, so the sandbox refuses to run anything (fail closed)."""

    code = "sandbox_unavailable"


class UnknownSandboxBackend(SandboxError, LookupError):
    """No sandbox backend is registered under that name."""

    code = "unknown_sandbox_backend"


class InvalidRunRequest(SandboxError, ValueError):
    """A run request contradicts itself (both code and argv, unsafe file names...)."""

    code = "invalid_run_request"


class KillRefused(SandboxError, PermissionError):
    """A process record cannot be killed from here (unknown, finished, other host, reused pid)."""

    code = "sandbox_kill_refused"
