"""The ``supervisor`` command, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from support.cli import SUPERVISOR

TESTS = Path(__file__).resolve().parent.parent
#: Lets the CLI import the tests' own tools (``support.agents``).
WITH_SUPPORT = {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}


def _run(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assert SUPERVISOR is not None, "the console script is not installed"
    return subprocess.run(
        [SUPERVISOR, *args], capture_output=True, text=True, timeout=180,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_help_lists_commands() -> None:
    result = _run("--help")
    assert result.returncode == 0
    assert "demo" in result.stdout
    assert "tools" in result.stdout


def test_tools_show_json() -> None:
    result = _run("tools", "show", "support.agents:inventory_lookup", "--json", env=WITH_SUPPORT)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["parameters"]["required"] == ["sku"]
    assert report["openai"]["function"]["strict"] is True
    assert len(report["schema_hash"]) == 64


def test_typed_error_is_one_clear_line_and_exit_2() -> None:
    result = _run("tools", "show", "support.agents:ToolResult", env=WITH_SUPPORT)
    assert result.returncode == 2
    assert "error [reference_mismatch]" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def walkthrough() -> subprocess.CompletedProcess[str]:
    """One run of ``supervisor demo --walkthrough``, shared by the checks of its output."""
    return _run("demo", "--walkthrough")


@pytest.mark.parametrize("code", ["reserved_argument", "unknown_argument", "approval_required"])
def test_demo_walkthrough_shows_refusals(
    walkthrough: subprocess.CompletedProcess[str], code: str
) -> None:
    assert walkthrough.returncode == 0, walkthrough.stderr
    assert f'"code": "{code}"' in walkthrough.stdout


def test_demo_without_tui_runs_the_agents_and_waits_for_decisions(tmp_path: Path) -> None:
    result = _run("demo", "--no-tui", "--auto-approve", "--home", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Demo ledger: sqlite:///{tmp_path / 'ledger.db'}" in result.stdout
    assert "create_customer" in result.stdout
    assert "All demo agents finished." in result.stdout
    from supervisor import SQLModelProvider

    with SQLModelProvider(f"sqlite:///{tmp_path / 'ledger.db'}") as provider:
        (proposal,) = provider.ledger.list(tool_name="create_customer").items
        assert proposal.status.value == "executed"
        assert proposal.approver_context is not None
        assert proposal.approver_context.via == "cli"
        kinds = {record.kind for record in provider.ledger.list_processes()}
        assert {"agent_run", "sandbox.local", "browser_worker"} <= kinds
        clicks = provider.ledger.list(tool_name="browser.click").items
        assert [proposal.status.value for proposal in clicks] == ["executed"]
    assert "form posts seen by the site: [{'q': ['alice']}]" in result.stdout
