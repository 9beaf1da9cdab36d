"""The real Claude Code CLI in a throwaway home, pointed at the scripted model on loopback.

The CLI comes from ``tests/node/claude-code`` (``make setup`` runs ``npm ci`` there); a test
without it is `unavailable` (skipped locally, failed under ``CI=true``).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.ledger.models import ProcessRecord, Proposal
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import CallTools, RecordedRequest, Reply, ScriptedModel, ToolCall, Turn
from support.cli import run_cli
from support.required import unavailable

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ROOT / "tests" / "node" / "claude-code" / "node_modules" / ".bin" / "claude"
#: The hook's timeout in the throwaway settings (the hook waits 5 s less).
HOOK_TIMEOUT = 60


def require_claude() -> Path:
    """The Claude Code CLI binary, or the test is `unavailable`."""
    if not os.access(CLAUDE, os.X_OK):
        unavailable(
            f"Claude Code CLI missing at {CLAUDE}: run `make setup` "
            "(or `bash .ci/node-deps.sh`) to npm ci tests/node/claude-code."
        )
    return CLAUDE


def tool_results(request: RecordedRequest) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of the request's last message."""
    content = request.messages[-1].get("content") if request.messages else None
    if not isinstance(content, list):
        return []
    return [
        block for block in content if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def result_text(block: dict[str, Any]) -> str:
    """A ``tool_result`` block's content as text."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    return json.dumps(content)


def bash_then_echo(command: str) -> Any:
    """A script: run ``command`` with the Bash tool, then say what the tool result was."""

    def turn(request: RecordedRequest) -> Turn:
        results = tool_results(request)
        if results:
            return Reply("tool said: " + " | ".join(result_text(block) for block in results))
        return CallTools([ToolCall("Bash", {"command": command, "description": "test step"})])

    return turn


@dataclass
class ClaudeHome:
    """A throwaway HOME with the hook installed, a project folder and a ledger."""

    home: Path
    project: Path
    db: Path

    def env(self, model: ScriptedModel | None = None) -> dict[str, str]:
        """The environment of the CLI and of ``supervisor`` commands on this ledger."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "SUPERVISOR_DB": str(self.db),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "LANG": "C.UTF-8",
        }
        if model is not None:
            env |= model.anthropic_env()
        return env

    def supervisor(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``supervisor ARGS`` on this ledger, from another process."""
        return run_cli(*args, env=self.env(), cwd=self.project)

    def start(self, model: ScriptedModel, prompt: str) -> subprocess.Popen[str]:
        """``claude -p PROMPT --output-format json`` in the project folder."""
        return subprocess.Popen(
            [str(CLAUDE), "-p", prompt, "--output-format", "json"],
            cwd=self.project, env=self.env(model), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    @contextmanager
    def ledger(self) -> Iterator[ApprovalLedger]:
        """The ledger, opened in this process."""
        with SQLModelProvider(f"sqlite:///{self.db}") as provider:
            yield provider.ledger


def make_home(tmp_path: Path) -> ClaudeHome:
    """A home with the supervisor's hooks installed at user scope and a fresh ledger."""
    require_claude()
    claude_home = ClaudeHome(tmp_path / "home", tmp_path / "project", tmp_path / "ledger.db")
    claude_home.home.mkdir()
    claude_home.project.mkdir()
    with SQLModelProvider(f"sqlite:///{claude_home.db}") as provider:
        provider.ledger.head()  # creates the ledger
    installed = claude_home.supervisor(
        "hook", "install", "claude-code", "--user", "--timeout", str(HOOK_TIMEOUT)
    )
    assert installed.returncode == 0, installed.stderr
    return claude_home


def finish(process: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    """Wait for the CLI and return its JSON result."""
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        raise AssertionError(f"claude did not finish: {stdout[-2000:]} {stderr[-2000:]}") from None
    assert process.returncode == 0, (process.returncode, stdout[-2000:], stderr[-2000:])
    result: dict[str, Any] = json.loads(stdout)
    return result


def wait_pending(ledger: ApprovalLedger, timeout: float = 60) -> Proposal:
    """The first pending proposal to appear."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page = ledger.list(status="pending")
        if page.items:
            return page.items[0]
        time.sleep(0.1)
    raise AssertionError("no pending proposal appeared")


def wait_process(ledger: ApprovalLedger, status: str, timeout: float = 30) -> list[ProcessRecord]:
    """The ``claude-code`` process rows, once one of them has ``status``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = [row for row in ledger.list_processes() if row.kind == "claude-code"]
        if any(row.status == status for row in rows):
            return [row for row in rows if row.status == status]
        time.sleep(0.1)
    raise AssertionError(f"no claude-code process became {status}")
