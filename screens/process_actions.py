"""Process control on the main screen: start a supervised run, follow its log, stop it.

The process-control service does the blocking work in thread workers; they post the typed
messages below and the handlers update the screen.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual import work
from textual.message import Message
from textual.screen import Screen

from screens.confirm_dialog import ConfirmDialog
from screens.literal import escaped
from screens.log_screen import LogScreen
from screens.run_dialog import RunDialog, RunRequest
from screens.widgets.processes.processes_pane import ProcessesPane
from supervisor.errors import SupervisorError
from supervisor.services.process_control import (
    ProcessControl,
    StartedRun,
    StopReport,
    log_path_of,
)


@dataclass
class RunStarted(Message):
    """A ``supervisor run`` subprocess was spawned."""

    run: StartedRun


@dataclass
class RunStopped(Message):
    """A run was stopped and its end recorded in the ledger."""

    report: StopReport


@dataclass
class ProcessControlFailed(Message):
    """Starting or stopping a run failed; ``message`` says why."""

    message: str


class ProcessActions(Screen[None]):
    """Actions and workers for the processes pane (mixed into the main screen).

    The screen that mixes it in is given the process-control service and sets
    :attr:`process_control` in its constructor.
    """

    process_control: ProcessControl

    def selected_process_id(self) -> str | None:
        """The selected process of the processes pane (by id, whatever row it is on now)."""
        return self.query_one(ProcessesPane).selected_process_id

    # -- start ----------------------------------------------------------------------------

    def action_start_run(self) -> None:
        self.app.push_screen(RunDialog(), self._run_requested)

    def _run_requested(self, request: RunRequest | None) -> None:
        if request is not None:
            self.start_run(request)

    @work(thread=True, exit_on_error=False, group="process-control")
    def start_run(self, request: RunRequest) -> None:
        try:
            started = self.process_control.start_run(request.reference, request.text)
        except (SupervisorError, OSError) as error:
            self.post_message(ProcessControlFailed(getattr(error, "message", str(error))))
            return
        self.post_message(RunStarted(started))

    def on_run_started(self, message: RunStarted) -> None:
        self.notify(
            f"{escaped(message.run.process_id)} (pid {message.run.pid})", title="Run started"
        )
        self.follow(message.run.process_id, message.run.log_path)

    # -- follow ---------------------------------------------------------------------------

    def follow(self, process_id: str, log_path: Path) -> None:
        """Open the log viewer on a run's output."""
        self.app.push_screen(LogScreen(process_id, log_path, stopper=self.confirm_stop))

    def action_follow_log(self) -> None:
        process_id = self.selected_process_id()
        if process_id is None:
            self.notify("Select a supervised process first.", severity="warning")
            return
        self.find_log(process_id)

    @work(thread=True, exit_on_error=False, group="process-control")
    def find_log(self, process_id: str) -> None:
        try:
            log_path = log_path_of(self.process_control.find(process_id))
        except SupervisorError as error:
            self.post_message(ProcessControlFailed(error.message))
            return
        if log_path is None:
            self.post_message(ProcessControlFailed(f"{escaped(process_id)} records no log file."))
            return
        self.app.call_from_thread(self.follow, process_id, log_path)

    # -- stop -----------------------------------------------------------------------------

    def action_stop_process(self) -> None:
        process_id = self.selected_process_id()
        if process_id is None:
            self.notify("Select a supervised process first.", severity="warning")
            return
        self.confirm_stop(process_id)

    def confirm_stop(self, process_id: str) -> None:
        """Ask to stop ``process_id``, naming the run, its pid and command; stop on "yes"."""
        row = next(
            (
                r
                for r in self.query_one(ProcessesPane).process_rows
                if r.key == f"process:{process_id}"
            ),
            None,
        )
        pid = f"pid {row.pid}" if row is not None and row.pid is not None else "pid unknown"
        host = escaped(row.host or "?") if row is not None else "?"
        command = escaped(row.name) if row is not None else ""
        question = (
            f"Stop {escaped(process_id)} ({pid} on {host})?\n{command}\n"
            "SIGTERM to its process group, SIGKILL after the grace period."
        )

        def confirmed(answer: bool | None) -> None:
            if answer:
                self.stop_process(process_id)

        self.app.push_screen(ConfirmDialog(question, "Stop"), confirmed)

    def stop_process(self, process_id: str) -> None:
        """Stop a run in a worker (SIGTERM, then SIGKILL after the grace period)."""
        self.notify(f"Stopping {escaped(process_id)} …")
        self._stop_worker(process_id)

    @work(thread=True, exit_on_error=False, group="process-stop")
    def _stop_worker(self, process_id: str) -> None:
        try:
            report = self.process_control.stop(process_id)
        except (SupervisorError, OSError) as error:
            self.post_message(ProcessControlFailed(getattr(error, "message", str(error))))
            return
        self.post_message(RunStopped(report))

    def on_run_stopped(self, message: RunStopped) -> None:
        report = message.report
        self.notify(
            f"{escaped(report.process_id)} stopped ({report.signal_name}, exit {report.exit_code})",
            title="Run stopped",
        )

    def on_process_control_failed(self, message: ProcessControlFailed) -> None:
        self.notify(message.message, title="Process control", severity="error")
