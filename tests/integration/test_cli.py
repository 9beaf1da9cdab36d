"""The ``supervisor`` command, run as a real subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SUPERVISOR = shutil.which("supervisor", path=str(Path(sys.executable).parent))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    assert SUPERVISOR is not None, "the console script is not installed"
    return subprocess.run([SUPERVISOR, *args], capture_output=True, text=True, timeout=60)


def test_help_lists_commands() -> None:
    result = _run("--help")
    assert result.returncode == 0
    assert "demo" in result.stdout
    assert "tools" in result.stdout


def test_tools_show_json() -> None:
    result = _run("tools", "show", "supervisor.demo.tools:inventory_lookup", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["parameters"]["required"] == ["sku"]
    assert report["openai"]["function"]["strict"] is True
    assert len(report["schema_hash"]) == 64


def test_typed_error_is_one_clear_line_and_exit_2() -> None:
    result = _run("tools", "show", "supervisor.demo.tools:ToolResult")
    assert result.returncode == 2
    assert "error [reference_mismatch]" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("code", ["reserved_argument", "unknown_argument", "approval_required"])
def test_demo_walkthrough_shows_refusals(code: str) -> None:
    result = _run("demo")
    assert result.returncode == 0, result.stderr
    assert f'"code": "{code}"' in result.stdout
