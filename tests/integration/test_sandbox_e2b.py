"""The E2B backend through the official SDK, against a local stand-in of envd (debug mode).

E2B's cloud is not reachable from CI: the SDK's debug mode skips the control plane and speaks
envd's real protocol (Connect RPC + /files) to ``tests/support/e2b_standin.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2b_standin import EnvdStandIn

from sandboxes.base import RunContext, default_backend_name, get_backend
from sandboxes.e2b_backend import E2BSandbox
from sandboxes.errors import SandboxUnavailable
from sandboxes.models import Limits, RunRequest
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[EnvdStandIn]:
    with EnvdStandIn(tmp_path / "sandbox-root") as server:
        yield server


@pytest.fixture
def ledger(sqlite_url: str) -> ApprovalLedger:
    return SQLModelProvider(sqlite_url).ledger


def e2b(standin: EnvdStandIn, ledger: ApprovalLedger, **options: Any) -> E2BSandbox:
    return E2BSandbox(ledger=ledger, connection={"debug": True, "sandbox_url": standin.url},
                      **options)  # fmt: skip


def test_code_files_streams_and_exit_code_round_trip(
    standin: EnvdStandIn, ledger: ApprovalLedger
) -> None:
    code = (
        "import pathlib, sys\nprint(pathlib.Path('data/in.txt').read_text().upper())\n"
        "print('warn', file=sys.stderr)\npathlib.Path('out/result.json').write_text('{}')\n"
        "sys.exit(4)\n"
    )
    request = RunRequest(language="python", code=code, files={"data/in.txt": "hi"})
    result = e2b(standin, ledger).run(request)
    assert (result.exit_code, result.stdout, result.stderr) == (4, "HI\n", "warn\n")
    assert result.files == {"out/result.json": b"{}"}
    [command] = standin.commands
    assert "ulimit -t 10 -v 1048576" in command and "-u 64" in command
    [record] = ledger.list_processes()
    assert record.kind == "sandbox.e2b" and record.status == "failed" and record.exit_code == 4
    assert record.command.endswith("[e2b:debug_sandbox_id]")


def test_a_timeout_kills_the_remote_command(standin: EnvdStandIn, ledger: ApprovalLedger) -> None:
    began = time.monotonic()
    result = e2b(standin, ledger).run(RunRequest(argv=("sleep", "30"), timeout_seconds=1.5))
    assert time.monotonic() - began < 10
    assert result.timed_out and result.killed and result.kill_reason == "timeout"
    assert [name for _, name in standin.signals] == ["SIGKILL"]


def test_limits_are_enforced_inside_the_remote_sandbox(
    standin: EnvdStandIn, ledger: ApprovalLedger
) -> None:
    request = RunRequest(language="python", code="while True: pass", timeout_seconds=20,
                         limits=Limits(cpu_seconds=1))  # fmt: skip
    result = e2b(standin, ledger).run(request)
    assert result.exit_code in (128 + 24, 128 + 9)  # SIGXCPU, or SIGKILL at the hard limit
    assert not result.timed_out


def test_output_is_capped_like_the_local_sandbox(
    standin: EnvdStandIn, ledger: ApprovalLedger
) -> None:
    code = "import sys\nfor _ in range(5):\n    sys.stdout.write('y' * 1024 * 1024)\n"
    request = RunRequest(language="python", code=code, limits=Limits(output_cap_bytes=64 * 1024))
    result = e2b(standin, ledger).run(request)
    assert result.stdout_bytes == 5 * 1024 * 1024 and result.stdout_truncated
    assert len(result.stdout) == 64 * 1024


def test_cancel_from_another_thread_kills_the_command(
    standin: EnvdStandIn, ledger: ApprovalLedger
) -> None:
    sandbox = e2b(standin, ledger)
    started = threading.Event()
    box: dict[str, Any] = {}

    def on_started(context: RunContext) -> None:
        box["process_id"] = context.process_id
        started.set()

    thread = threading.Thread(target=lambda: box.update(result=sandbox.run(
        RunRequest(argv=("sleep", "30"), timeout_seconds=60), on_started=on_started)))  # fmt: skip
    thread.start()
    assert started.wait(20)
    assert sandbox.cancel(box["process_id"])
    thread.join(20)
    assert box["result"].killed and box["result"].kill_reason == "supervisor"


def test_reusing_a_sandbox_reapplies_the_timeout_after_resume(
    standin: EnvdStandIn, ledger: ApprovalLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    import e2b as sdk

    calls: list[int] = []
    monkeypatch.setattr(
        sdk.Sandbox, "set_timeout", lambda self, timeout, **_: calls.append(timeout)
    )
    sandbox = e2b(standin, ledger, sandbox_id="debug_sandbox_id", lifetime_seconds=120)
    result = sandbox.run(RunRequest(argv=("true",), timeout_seconds=100))
    assert result.exit_code == 0
    assert calls == [160]  # the run's timeout plus a minute, re-applied after connecting


def test_backend_choice_and_refusal_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUPERVISOR_SANDBOX_BACKEND", raising=False)
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    monkeypatch.delenv("E2B_DEBUG", raising=False)
    assert default_backend_name() == "local"
    with pytest.raises(SandboxUnavailable, match="E2B_API_KEY"):
        get_backend("e2b").run(RunRequest(argv=("true",)))
    monkeypatch.setenv("E2B_API_KEY", "e2b_test")
    assert default_backend_name() == "e2b"
    monkeypatch.setenv("SUPERVISOR_SANDBOX_BACKEND", "local")
    assert default_backend_name() == "local"


def test_importing_the_sandbox_tools_does_not_import_e2b() -> None:
    code = (
        "import sys, json, supervisor, sandboxes\nfrom sandboxes import run_code, run_command\n"
        "print(json.dumps(sorted(m for m in ('e2b', 'textual', 'screens') if m in sys.modules)))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout  # fmt: skip
    assert json.loads(loaded) == []
