"""What a browser worker is told to do: the task, its fence and where to ask for approval.

The configuration travels from `BrowserTask` to the worker process as a JSON file; the model's
API key never does (it goes through the child's environment only).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sandboxes.browser.policy import BrowserPolicy

CHROMIUM_CANDIDATES = (
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome",
    "/usr/bin/google-chrome-stable",
)
"""Where a Chromium is looked for when none is configured (Debian's package first)."""

CHROMIUM_ENV = "SUPERVISOR_CHROMIUM"
"""Environment variable naming the Chromium executable to use."""

QUIET_ENV: dict[str, str] = {
    "ANONYMIZED_TELEMETRY": "false",
    "BROWSER_USE_CLOUD_SYNC": "false",
    "BROWSER_USE_VERSION_CHECK": "false",
    "BROWSER_USE_CLOUD_HINTS": "false",
    "BROWSER_USE_DISABLE_EXTENSIONS": "1",
    "BROWSER_USE_SETUP_LOGGING": "false",
}
"""browser-use settings that turn off telemetry, cloud sync, the PyPI version check, cloud
hints and the download of default extensions (names as read by browser_use/config.py)."""

CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-default-apps",
    "--metrics-recording-only",
    "--safebrowsing-disable-auto-update",
)
"""Flags for a quiet, headless Chromium; ``--no-sandbox`` because the worker may run as root
(the worker process itself is the isolation boundary, see docs/browser.md)."""


SENSITIVE_DATA_ENV = "SUPERVISOR_BROWSER_SENSITIVE_DATA"
"""Environment variable that carries a task's ``sensitive_data`` (JSON) to its worker only."""
PARENT_ENV = "SUPERVISOR_BROWSER_PARENT"
"""The pid of the process that started a worker: the worker stops (as on SIGTERM) once that
process is gone, so a killed supervisor never leaves a browser running."""

SensitiveData = dict[str, str | dict[str, str]]
"""browser-use's form: placeholder -> value, or domain pattern -> {placeholder: value}."""


def sensitive_values(data: SensitiveData) -> list[str]:
    """Every secret value in ``data`` (flat or per domain)."""
    values: list[str] = []
    for value in data.values():
        values.extend(value.values() if isinstance(value, dict) else [value])
    return values


class ChromiumNotFound(RuntimeError):
    """No Chromium executable was configured or found."""

    code = "chromium_not_found"


def find_chromium(configured: str | None = None) -> str:
    """The Chromium executable to launch.

    Args:
        configured: An explicit path or command name; else ``$SUPERVISOR_CHROMIUM``, else the
            usual Debian locations, else ``chromium`` on ``PATH``.

    Returns:
        An absolute path to an executable.

    Raises:
        ChromiumNotFound: Nothing usable was found; the message says how to fix it.
    """
    wanted = configured or os.environ.get(CHROMIUM_ENV)
    if wanted:
        resolved = shutil.which(wanted)
        if resolved is None:
            raise ChromiumNotFound(f"Chromium {wanted!r} is not an executable.")
        return resolved
    for candidate in CHROMIUM_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    for name in ("chromium", "chromium-browser", "google-chrome"):
        resolved = shutil.which(name)
        if resolved is not None:
            return resolved
    raise ChromiumNotFound(
        "No Chromium found. Install it (`apt-get install chromium`) or set "
        f"{CHROMIUM_ENV}=/path/to/chromium."
    )


class BrowserWorkerConfig(BaseModel):
    """Everything a browser worker needs, except the model's API key.

    Attributes:
        task: What the browser agent should do.
        policy: Allowed domains and allow/ask/deny rules.
        model: Model name sent to the OpenAI-compatible endpoint.
        base_url: The endpoint; ``None`` means ``$OPENAI_BASE_URL``.
        ledger_url: The ledger's SQLAlchemy URL; ``None`` means ``$SUPERVISOR_DB`` or the default.
        worker_id: The process id in the ledger and the ``browser`` of every execution target.
        owner: The agent id proposals are filed under.
        thread_id: The thread proposals are filed under.
        chromium_path: Chromium to launch; ``None`` finds it.
        headless: Run without a window.
        max_steps: Most agent steps.
        approval_timeout: The proposals' TTL, in seconds: how long the worker waits for a
            decision, or until the proposal's extended expiry when an operator extends it (at
            most 24 times this, 7 days; see `sandboxes.browser.gate.longest_approval_wait`).
        result_path: Where the worker writes its JSON result.
        sensitive_data: browser-use's ``sensitive_data``; in memory only (never serialised: it
            reaches the worker through :data:`SENSITIVE_DATA_ENV`).
    """

    model_config = ConfigDict(frozen=True)

    task: str
    policy: BrowserPolicy
    model: str = "gpt-4o-mini"
    base_url: str | None = None
    ledger_url: str | None = None
    worker_id: str = Field(default_factory=lambda: f"browser-{uuid.uuid4().hex[:12]}")
    owner: str = "browser-agent"
    thread_id: str | None = None
    chromium_path: str | None = None
    headless: bool = True
    max_steps: int = Field(default=20, ge=1)
    approval_timeout: float = Field(default=600.0, gt=0)
    result_path: str | None = None
    sensitive_data: SensitiveData = Field(default_factory=dict, exclude=True, repr=False)


DENIED_EXIT_CODE = 3
"""Exit code of a worker the gate stopped because the browser loaded a page off the allowlist."""

RunOutcome = Literal["completed", "denied", "stopped", "failed"]


class BrowserDenial(BaseModel):
    """Why the gate stopped a worker: what the browser loaded that it may not load.

    Attributes:
        code: Stable reason (``navigation_left_allowlist``, ``navigation_unverifiable``).
        url: The URL Chromium reported as loaded (empty when it could not say).
        reason: A sentence for the operator.
    """

    model_config = ConfigDict(frozen=True)

    code: str
    url: str
    reason: str


class BrowserRunResult(BaseModel):
    """What a finished worker reports.

    ``outcome`` is ``completed`` (the agent finished or ran out of steps), ``denied`` (the
    gate stopped it; ``denial`` says why), ``stopped`` (SIGTERM) or ``failed``.
    """

    model_config = ConfigDict(frozen=True)

    worker_id: str
    exit_code: int
    outcome: RunOutcome = "failed"
    denial: BrowserDenial | None = None
    success: bool | None = None
    final_result: str | None = None
    steps: int = 0
    errors: tuple[str, ...] = ()

    @classmethod
    def read(cls, path: Path, *, worker_id: str, exit_code: int) -> BrowserRunResult:
        """Load the worker's result file, or describe a worker that wrote none."""
        try:
            loaded = cls.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(worker_id=worker_id, exit_code=exit_code, errors=("no result written",))
        return loaded.model_copy(update={"exit_code": exit_code})
