"""``supervisor processes``: the supervised processes (agent runs, browser workers, sandbox
runs), what each is doing now, their logs, and stopping one.

The state is the TUI's: a live process whose lease ran out is ``lost since HH:MM:SS`` (computed
here, nothing written: ``list`` and ``show`` only read). ``stop`` sends SIGTERM to the process
group, SIGKILL after ``--grace`` seconds, and records the end, as ``k`` does in the TUI; it only
reaches processes on this host. A process id may be given by a unique prefix.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import click

from supervisor.cli.output import echo_json, echo_line
from supervisor.cli.proposals import db_option, ledger_url, open_ledger
from supervisor.errors import SupervisorError
from supervisor.ledger.models import LIVE_PROCESS_STATUSES, ProcessRecord
from supervisor.ledger.service import ApprovalLedger

#: Bytes of a log shown by ``show`` (its end).
LOG_TAIL_BYTES = 4096


class ProcessNotFound(SupervisorError, LookupError):
    """No process (or no unique one) has that id or id prefix."""

    code = "process_not_found"


def find_process(ledger: ApprovalLedger, given: str) -> ProcessRecord:
    """The process ``given`` names: its id, or a prefix only it has.

    Raises:
        ProcessNotFound: none, or several (the candidates are listed).
    """
    processes = ledger.list_processes()
    exact = [process for process in processes if process.process_id == given]
    if exact:
        return exact[0]
    found = [process for process in processes if given and process.process_id.startswith(given)]
    if len(found) == 1:
        return found[0]
    if found:
        shown = ", ".join(process.process_id for process in found[:5])
        raise ProcessNotFound(
            f"{len(found)} processes start with {given!r}: {shown}.",
            hint="Type more of the id.", candidates=[p.process_id for p in found],
        )  # fmt: skip
    raise ProcessNotFound(
        f"No process {given!r} in the ledger.",
        hint="`supervisor processes list --all` lists them all.",
    )


def process_json(process: ProcessRecord, now: datetime) -> dict[str, Any]:
    """A process as JSON: the record, its shown state and what it is doing now."""
    from supervisor.services.processes import process_state, step_text

    state, lost_at = process_state(process, now)
    live = state in LIVE_PROCESS_STATUSES
    data: dict[str, Any] = process.model_dump(mode="json")
    data["state"] = state
    data["lost_since"] = lost_at.isoformat() if lost_at else None
    data["doing"] = step_text(process.step, now) if process.step is not None and live else None
    return data


def process_line(process: ProcessRecord, now: datetime) -> str:
    """One line: id, pid, state, kind, heartbeat age, doing, host, command."""
    from supervisor.services.processes import process_state, step_text

    state, _ = process_state(process, now)
    doing = "-"
    if process.step is not None and state in LIVE_PROCESS_STATUSES:
        doing = step_text(process.step, now)
    age = int((now - process.heartbeat_at).total_seconds())
    pid = process.pid if process.pid is not None else "-"
    return (
        f"{process.process_id}  pid {pid}  {state}  {process.kind}  beat {age}s ago  "
        f"{doing}  {process.host}  {process.command}"
    )


@click.group()
def processes() -> None:
    """List supervised processes, show one (with its log), stop one."""


@processes.command("list")
@click.option("--all", "show_all", is_flag=True, help="Also processes that exited or stopped.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@db_option
def list_processes(show_all: bool, as_json: bool, db_url: str | None) -> None:
    """Live and lost processes, newest first (--all: every one)."""
    with open_ledger(db_url, read_only=True) as ledger:
        found = ledger.list_processes()
        now = ledger.clock.now()
    if not show_all:
        found = [process for process in found if process.exit_code is None]
    if as_json:
        echo_json({"processes": [process_json(process, now) for process in found]})
        return
    if not found:
        echo_line("No live processes." + ("" if show_all else " (--all lists finished ones.)"))
        return
    for process in found:
        echo_line(process_line(process, now))


@processes.command("show")
@click.argument("process_id")
@click.option("--json", "as_json", is_flag=True, help="One JSON document (with the log's end).")
@db_option
def show(process_id: str, as_json: bool, db_url: str | None) -> None:
    """One process: its record, what it is doing, and the end of its log."""
    from supervisor.services.process_control import log_path_of

    with open_ledger(db_url, read_only=True) as ledger:
        process = find_process(ledger, process_id)
        now = ledger.clock.now()
    log = log_path_of(process)
    tail = _log_tail(log) if log is not None else None
    if as_json:
        echo_json({**process_json(process, now), "log_path": str(log) if log else None,
                   "log_tail": tail})  # fmt: skip
        return
    data = process_json(process, now)
    for key in ("process_id", "kind", "state", "doing", "pid", "host", "command", "started_at",
                "heartbeat_at", "exit_code", "lease_expires_at", "lost_since"):  # fmt: skip
        echo_line(f"{key:<17}{data[key] if data[key] is not None else '-'}")
    echo_line(f"{'log':<17}{log if log is not None else '- (this process records no log)'}")
    if tail:
        echo_line("")
        for line in tail.splitlines():
            echo_line(f"  {line}")


@processes.command("stop")
@click.argument("process_id")
@click.option("--grace", type=click.FloatRange(0, 600), default=5.0, show_default=True,
              help="Seconds between SIGTERM and SIGKILL.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@db_option
def stop(process_id: str, grace: float, as_json: bool, db_url: str | None) -> None:
    """Stop a process on this host: SIGTERM to its group, SIGKILL after --grace seconds."""
    from supervisor.services.process_control import ProcessControl

    with open_ledger(db_url, must_exist=True) as ledger:
        process = find_process(ledger, process_id)
        report = ProcessControl(ledger, ledger_url(db_url)).stop(process.process_id, grace)
    if as_json:
        echo_json({"process_id": report.process_id, "signal": report.signal_name,
                   "exit_code": report.exit_code})  # fmt: skip
        return
    if report.signal_name == "none":
        echo_line(f"{report.process_id} had already ended (exit {report.exit_code}).")
        return
    echo_line(f"stopped {report.process_id} with {report.signal_name} (exit {report.exit_code})")


def _log_tail(path: Path) -> str | None:
    """The last :data:`LOG_TAIL_BYTES` of a log (``None`` when it cannot be read)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None
