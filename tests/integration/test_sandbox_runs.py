"""Sandbox runs as users rely on them: real bubblewrap, a real SQLite ledger, real kills."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli import SUPERVISOR
from support.required import require_bwrap

import sandboxes
from sandboxes.base import RunContext
from sandboxes.errors import InvalidRunRequest
from sandboxes.events import CallbackSink, RunEvent
from sandboxes.local import BubblewrapSandbox
from sandboxes.models import Limits, RunRequest, RunResult
from sandboxes.runner import SandboxSettings, run_in_sandbox
from supervisor.canonical import args_hash
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider


@pytest.fixture(autouse=True)
def _require_bwrap() -> None:
    require_bwrap()


@pytest.fixture
def ledger(sqlite_url: str) -> ApprovalLedger:
    return SQLModelProvider(sqlite_url).ledger


def test_exit_codes_and_both_streams_propagate(ledger: ApprovalLedger) -> None:
    result = BubblewrapSandbox(ledger=ledger).run(
        RunRequest(argv=("sh", "-c", "echo out; echo err >&2; exit 7"))
    )
    assert (result.exit_code, result.stdout, result.stderr) == (7, "out\n", "err\n")
    assert not result.ok and not result.killed


def test_files_in_and_files_out(ledger: ApprovalLedger) -> None:
    code = (
        "import pathlib\n"
        "text = pathlib.Path('data/in.txt').read_text()\n"
        "pathlib.Path('out/sub').mkdir()\n"
        "pathlib.Path('out/sub/upper.txt').write_text(text.upper())\n"
        "pathlib.Path('report.bin').write_bytes(bytes(range(5)))\n"
    )
    request = RunRequest(language="python", code=code, files={"data/in.txt": "hello"},
                         collect=("report.bin",))  # fmt: skip
    result = BubblewrapSandbox(ledger=ledger).run(request)
    assert result.ok, result.stderr
    assert result.files == {"report.bin": bytes(range(5)), "out/sub/upper.txt": b"HELLO"}


def test_100_mb_of_stdout_is_capped_and_kept_as_a_blob(ledger: ApprovalLedger) -> None:
    cap = 1024 * 1024
    code = (
        "import sys\nchunk = b'x' * (1024 * 1024)\n"
        "for _ in range(100):\n    sys.stdout.buffer.write(chunk)\n"
    )
    request = RunRequest(language="python", code=code, timeout_seconds=60,
                         limits=Limits(output_cap_bytes=cap))  # fmt: skip
    result = BubblewrapSandbox(ledger=ledger).run(request)
    assert result.exit_code == 0, result.stderr
    assert result.stdout_bytes == 100 * 1024 * 1024
    assert result.stdout_truncated
    assert len(result.stdout.encode()) <= cap
    assert result.stdout_blob is not None
    blob = ledger.get_blob(result.stdout_blob)
    assert blob is not None and blob.size == len(result.stdout.encode()) <= cap


def test_every_run_is_a_process_record_and_traced(ledger: ApprovalLedger) -> None:
    events: list[RunEvent] = []
    sandbox = BubblewrapSandbox(ledger=ledger, sinks=[CallbackSink(events.append)])
    result = sandbox.run(RunRequest(argv=("true",)), actor="operator:test")
    [record] = [p for p in ledger.list_processes() if p.process_id == result.process_id]
    assert record.kind == "sandbox.local" and record.status == "exited"
    assert record.exit_code == 0 and record.pid and record.host
    kinds = [e.kind for e in ledger.trace_events(run_id=result.run_id)]
    assert kinds == ["sandbox.started", "sandbox.finished"]
    assert [e.kind for e in events] == kinds
    assert events[0].actor == "operator:test"
    assert events[0].payload["digest"] == RunRequest(argv=("true",)).digest()


def _run_in_thread(
    sandbox: BubblewrapSandbox, request: RunRequest
) -> tuple[threading.Thread, dict[str, Any], threading.Event]:
    box: dict[str, Any] = {}
    started = threading.Event()

    def on_started(context: RunContext) -> None:
        box["process_id"] = context.process_id
        started.set()

    def target() -> None:
        box["result"] = sandbox.run(request, on_started=on_started)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    assert started.wait(20)
    return thread, box, started


def test_a_kill_from_another_thread_stops_the_run(ledger: ApprovalLedger) -> None:
    sandbox = BubblewrapSandbox(ledger=ledger)
    request = RunRequest(argv=("sh", "-c", "sleep 60 & sleep 61"), timeout_seconds=120)
    thread, box, _ = _run_in_thread(sandbox, request)
    began = time.monotonic()
    assert sandboxes.kill(box["process_id"], ledger=ledger) is True
    thread.join(10)
    result: RunResult = box["result"]
    assert time.monotonic() - began < 10
    assert result.killed and result.kill_reason == "supervisor"
    [record] = [p for p in ledger.list_processes() if p.process_id == result.process_id]
    assert record.status == "killed"
    live = subprocess.run(["ps", "-o", "stat=,args=", "-u", "65534"], capture_output=True,
                          text=True).stdout.splitlines()  # fmt: skip
    assert [line for line in live if "sleep 6" in line and not line.startswith("Z")] == []


def test_a_kill_from_another_process_stops_the_run(ledger: ApprovalLedger, sqlite_url: str) -> None:
    sandbox = BubblewrapSandbox(ledger=ledger)
    request = RunRequest(argv=("sleep", "60"), timeout_seconds=120)
    thread, box, _ = _run_in_thread(sandbox, request)
    killer = (
        "import sys, sandboxes\nfrom supervisor.store.provider import SQLModelProvider\n"
        "print(sandboxes.kill(sys.argv[1], ledger=SQLModelProvider(sys.argv[2]).ledger))"
    )
    done = subprocess.run([sys.executable, "-c", killer, box["process_id"], sqlite_url],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.stdout.strip() == "True", done.stderr
    thread.join(10)
    assert box["result"].killed and box["result"].kill_reason == "supervisor"


def test_kill_refuses_an_unknown_process(ledger: ApprovalLedger) -> None:
    with pytest.raises(sandboxes.KillRefused):
        sandboxes.kill("sandbox-nope", ledger=ledger)


def test_run_code_requires_approval_and_binds_backend_and_limits(ledger: ApprovalLedger) -> None:
    from sandboxes import configure_sandbox_tools, run_code, run_command

    assert run_code.policy.requires_approval and run_command.policy.requires_approval
    arguments = {"language": "python", "code": "print(6 * 7)", "files": {}}
    refused = run_code.dispatch(arguments)
    assert refused.error is not None and refused.error.code == "approval_required"

    settings = configure_sandbox_tools(backend="local", ledger=ledger, limits=Limits())
    try:
        target = run_code.execution_target
        assert target == {"backend": "local", "limits": Limits().model_dump(),
                          "timeout_seconds": settings.timeout_seconds}  # fmt: skip
        before = args_hash(run_code.name, run_code.schema_hash, arguments, target)
        approved = run_code.dispatch(arguments, approved=True)
        assert approved.error is None and approved.value["stdout"] == "42\n"
        assert approved.value["backend"] == "local"
        configure_sandbox_tools(limits=Limits(cpu_seconds=99))
        after = args_hash(run_code.name, run_code.schema_hash, arguments, run_code.execution_target)
        assert after != before  # an approval never carries over to looser limits
        command = run_command.dispatch({"argv": ["sh", "-c", "exit 3"]}, approved=True)
        assert command.value["exit_code"] == 3
    finally:
        configure_sandbox_tools(limits=Limits())


def test_sandbox_exec_passes_everything_through_and_is_recorded(sqlite_url: str) -> None:
    assert SUPERVISOR is not None
    done = subprocess.run(
        [SUPERVISOR, "sandbox", "exec", "--db", sqlite_url, "--timeout", "20", "--",
         "sh", "-c", "echo to-out; echo to-err >&2; exit 9"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (9, "to-out\n", "to-err\n")
    ledger = SQLModelProvider(sqlite_url).ledger
    [record] = ledger.list_processes()
    assert record.kind == "sandbox.local" and record.exit_code == 9
    [started, finished] = ledger.trace_events(kind=None)
    assert started.payload["actor"].startswith("operator:")
    assert finished.kind == "sandbox.finished" and finished.payload["exit_code"] == 9


UNPLACEABLE = {
    "named out": {"out": "shadows the returned directory"},
    "file and its directory": {"data": "1", "data/in.txt": "2"},
    "one file twice": {"./a.txt": "1", "a.txt": "2"},
    "the code's own name": {".supervisor_main.py": "print('swapped')"},
}


@pytest.mark.parametrize("files", UNPLACEABLE.values(), ids=UNPLACEABLE.keys())
def test_input_files_that_cannot_be_placed_are_a_typed_error(
    ledger: ApprovalLedger, tmp_path: Path, files: dict[str, bytes | str]
) -> None:
    base_dir = tmp_path / "runs"
    base_dir.mkdir()
    settings = SandboxSettings(backend="local", ledger=ledger,
                               backend_options={"base_dir": base_dir})  # fmt: skip
    with pytest.raises(InvalidRunRequest) as refused:
        run_in_sandbox(settings, language="python", code="print(1)", files=files)
    assert refused.value.code == "invalid_run_request"
    assert refused.value.hint
    assert ledger.list_processes() == [] and ledger.trace_events() == []  # nothing ran
    assert list(base_dir.iterdir()) == []  # no work directory was made


def test_sandbox_exec_with_an_out_of_range_timeout_is_a_typed_error(sqlite_url: str) -> None:
    assert SUPERVISOR is not None
    done = subprocess.run(
        [SUPERVISOR, "sandbox", "exec", "--db", sqlite_url, "--timeout", "1e9", "--", "true"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error [invalid_run_request]: ")
    assert "timeout_seconds" in done.stderr and "Traceback" not in done.stderr
