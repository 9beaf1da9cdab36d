"""Execution boundaries: code sandboxes and the Browser Use worker. Never imports the UI.

Names load on first use, so ``import sandboxes`` is light and never imports the e2b SDK (only
choosing the ``e2b`` backend does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "run_code": "sandboxes.tools",
    "run_command": "sandboxes.tools",
    "configure_sandbox_tools": "sandboxes.tools",
    "Sandbox": "sandboxes.base",
    "RunContext": "sandboxes.base",
    "get_backend": "sandboxes.base",
    "default_backend_name": "sandboxes.base",
    "BACKENDS": "sandboxes.base",
    "RunRequest": "sandboxes.models",
    "RunResult": "sandboxes.models",
    "Limits": "sandboxes.models",
    "RunEvent": "sandboxes.events",
    "LedgerSink": "sandboxes.events",
    "CallbackSink": "sandboxes.events",
    "SandboxSettings": "sandboxes.runner",
    "run_in_sandbox": "sandboxes.runner",
    "kill": "sandboxes.control",
    "SandboxError": "sandboxes.errors",
    "SandboxUnavailable": "sandboxes.errors",
    "UnknownSandboxBackend": "sandboxes.errors",
    "InvalidRunRequest": "sandboxes.errors",
    "KillRefused": "sandboxes.errors",
    "BrowserTask": "sandboxes.browser",
    "BrowserPolicy": "sandboxes.browser",
    "BrowserRule": "sandboxes.browser",
}

__all__ = [
    "BACKENDS",
    "BrowserPolicy",
    "BrowserRule",
    "BrowserTask",
    "CallbackSink",
    "InvalidRunRequest",
    "KillRefused",
    "LedgerSink",
    "Limits",
    "RunContext",
    "RunEvent",
    "RunRequest",
    "RunResult",
    "Sandbox",
    "SandboxError",
    "SandboxSettings",
    "SandboxUnavailable",
    "UnknownSandboxBackend",
    "configure_sandbox_tools",
    "default_backend_name",
    "get_backend",
    "kill",
    "run_code",
    "run_command",
    "run_in_sandbox",
]

if TYPE_CHECKING:
    from sandboxes.base import BACKENDS, RunContext, Sandbox, default_backend_name, get_backend
    from sandboxes.browser import BrowserPolicy, BrowserRule, BrowserTask
    from sandboxes.control import kill
    from sandboxes.errors import (
        InvalidRunRequest,
        KillRefused,
        SandboxError,
        SandboxUnavailable,
        UnknownSandboxBackend,
    )
    from sandboxes.events import CallbackSink, LedgerSink, RunEvent
    from sandboxes.models import Limits, RunRequest, RunResult
    from sandboxes.runner import SandboxSettings, run_in_sandbox
    from sandboxes.tools import configure_sandbox_tools, run_code, run_command


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
