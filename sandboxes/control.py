"""Stopping a sandbox run from any process, through its record in the ledger's process table."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from sandboxes.errors import KillRefused
from sandboxes.events import RunLedger
from sandboxes.proctree import terminate_run
from supervisor.ledger.models import ProcessRecord

KILL_GRACE_SECONDS = 2.0


def find_process(ledger: RunLedger, process_id: str) -> ProcessRecord:
    """The process record of a sandbox run.

    Raises:
        KillRefused: There is no sandbox run with that id.
    """
    for record in ledger.list_processes():
        if record.process_id == process_id and record.kind.startswith("sandbox."):
            return record
    raise KillRefused(
        f"No sandbox run with process id {process_id!r}.",
        hint="List sandbox runs in the TUI or with the ledger's list_processes().",
    )


def kill(
    process_id: str, *, ledger: RunLedger | None = None, grace: float = KILL_GRACE_SECONDS
) -> bool:
    """Stop a running sandbox run: SIGTERM its processes, then SIGKILL the whole tree.

    Works from any process on the run's host (the TUI, a CLI, another thread). The record's pid
    is checked to still be a bubblewrap process before anything is signalled, so a recycled pid
    is never hit.

    Args:
        process_id: The run's process id (``RunResult.process_id`` / the process table).
        ledger: The ledger holding the record; default: ``SQLModelProvider().ledger``.
        grace: Seconds between SIGTERM and SIGKILL.

    Returns:
        True if the run was signalled, False if it had already finished.

    Raises:
        KillRefused: Unknown run, another host, a backend without a local pid, or the pid now
            belongs to something else.
    """
    if ledger is None:
        from supervisor.store.provider import SQLModelProvider

        ledger = SQLModelProvider().ledger
    record = find_process(ledger, process_id)
    if record.status != "running":
        return False
    if record.kind == "sandbox.e2b":
        return _kill_e2b(record, ledger)
    if record.host != socket.gethostname():
        raise KillRefused(
            f"Sandbox run {process_id} runs on host {record.host!r}, not here.",
            hint=f"Run the kill on {record.host}.",
        )
    pid = record.pid
    if pid is None or not _is_bwrap(pid):
        ledger.heartbeat(process_id, status="lost")
        return False
    terminate_run(pid, grace)
    ledger.heartbeat(process_id, status="killed")
    return True


def _kill_e2b(record: ProcessRecord, ledger: RunLedger) -> bool:
    sandbox_id = (
        record.command.rpartition("[e2b:")[2].rstrip("]") if "[e2b:" in record.command else ""
    )
    if not sandbox_id:
        raise KillRefused(f"Process {record.process_id} has no E2B sandbox id to kill.")
    from e2b import Sandbox as E2BSdkSandbox

    E2BSdkSandbox.kill(sandbox_id=sandbox_id)
    ledger.heartbeat(record.process_id, status="killed")
    return True


def _is_bwrap(pid: int) -> bool:
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
    except OSError:
        return False
    return os.path.basename(argv0) == b"bwrap"
