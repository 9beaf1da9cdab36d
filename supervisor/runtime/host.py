"""Supervised agent runs: ``supervisor run MODULE:FACTORY --input TEXT``.

The factory is named by the operator on the command line (the same trust as ``tools show``), so
it is imported; nothing read from the ledger is ever imported or executed. The run records
itself in the ledger's process table (kind ``agent_run``) with a heartbeat, pauses for human
decisions with ``wait_for_decision``, resumes with ``continue_model=True`` and records its exit.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import signal
import socket
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from supervisor.errors import SupervisorError
from supervisor.ledger.lease_time import renew_every
from supervisor.ledger.models import ProcessRecord, ProcessStep
from supervisor.runtime.agent import MemAgent
from supervisor.runtime.builder import MemAgentBuilder
from supervisor.runtime.steps import StepWriter

if TYPE_CHECKING:
    from supervisor.ledger.service import ApprovalLedger
    from supervisor.runtime.results import RunResult

HEARTBEAT_SECONDS = 2.0
#: Exit code of a run stopped by SIGTERM/SIGINT (128 + SIGTERM, as shells report it).
STOPPED_EXIT_CODE = 128 + signal.SIGTERM

Echo = Callable[[str], object]


class FactoryReferenceError(SupervisorError, ValueError):
    """``MODULE:FACTORY`` does not name a callable that returns an agent or a builder."""

    code = "invalid_factory_reference"


class RunStopped(BaseException):
    """Raised in the main thread on SIGTERM/SIGINT (a BaseException so agents cannot swallow it)."""


def load_factory(reference: str) -> Callable[[], Any]:
    """Import the callable named ``package.module:qualname``.

    Raises:
        FactoryReferenceError: The reference is malformed, names nothing callable, or names a
            callable that needs arguments.
    """
    module_name, colon, qualname = reference.partition(":")
    if not colon or not module_name or not qualname:
        raise FactoryReferenceError(
            f"{reference!r} is not MODULE:FACTORY.",
            hint="Name a zero-argument function, e.g. mypackage.agents:make_agent.",
        )
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise FactoryReferenceError(
            f"Cannot import {module_name!r}: {error}.",
            hint="Check the module path and that its folder is on PYTHONPATH.",
        ) from error
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise FactoryReferenceError(f"{module_name!r} has no attribute {qualname!r}.")
    if not callable(target):
        raise FactoryReferenceError(f"{reference!r} is not callable.")
    _check_takes_no_arguments(reference, target)
    factory: Callable[[], Any] = target
    return factory


def _check_takes_no_arguments(reference: str, target: Callable[..., Any]) -> None:
    """Refuse a factory that cannot be called with no arguments, before anything runs."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return  # no introspectable signature (some builtins): calling it is the only test
    try:
        signature.bind()
    except TypeError:
        needed = [
            name
            for name, parameter in signature.parameters.items()
            if parameter.default is parameter.empty
            and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
        ]
        raise FactoryReferenceError(
            f"{reference!r} needs arguments ({', '.join(needed)}); the factory is called "
            "with none.",
            hint="Name a zero-argument function that returns a MemAgent or MemAgentBuilder "
            "(wrap yours: def make_agent(): return build(...)).",
        ) from None


def build_agent(reference: str) -> MemAgent:
    """Call the factory and return its agent (a returned builder is built).

    Raises:
        FactoryReferenceError: The factory returned neither a ``MemAgent`` nor a builder.
    """
    made = load_factory(reference)()
    if isinstance(made, MemAgentBuilder):
        made = made.build()
    if not isinstance(made, MemAgent):
        raise FactoryReferenceError(
            f"{reference} returned {type(made).__name__}, not a MemAgent or MemAgentBuilder."
        )
    return made


@dataclass
class SupervisedProcess:
    """The process-table row of this run, its heartbeat thread and its current step."""

    ledger: ApprovalLedger
    process_id: str
    status: str = "running"
    steps: StepWriter | None = None

    def step(self, kind: str, detail: str = "") -> None:
        """Say what the process does now (shown in the processes pane and CLI)."""
        if self.steps is not None:
            self.steps.set(kind, detail)

    def wait_status(self, tool_name: str) -> None:
        """Record ``waiting_for_approval`` and the step saying on what, in one write."""
        self.status = status = "waiting_for_approval"
        if self.steps is None:
            self.ledger.heartbeat(self.process_id, status=status)
            return

        def write(step: ProcessStep) -> None:
            self.ledger.heartbeat(self.process_id, status=status, step=step)

        self.steps.write_with("waiting_for_approval", tool_name, write)

    @contextmanager
    def reporting_steps(self, model: str) -> Iterator[None]:
        """Write this process's current step from its runs' events for the block."""
        self.steps = StepWriter(self.ledger, self.process_id, model)
        try:
            with self.steps.running():
                yield
        finally:
            self.steps = None

    def set_status(self, status: str, exit_code: int | None = None) -> None:
        """Record a new status (and exit code) with a heartbeat."""
        self.status = status
        self.ledger.heartbeat(self.process_id, status=status, exit_code=exit_code)

    @contextmanager
    def heartbeats(self, every: float | None = None) -> Iterator[None]:
        """Refresh the heartbeat (and so the lease) while the block runs.

        Every ``every`` seconds; by default every ``HEARTBEAT_SECONDS``, or a third of the
        ledger's lease when that is shorter.
        """
        every = every or renew_every(self.ledger.lease_seconds, HEARTBEAT_SECONDS)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(every):
                self.ledger.heartbeat(self.process_id)

        thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=every + 1)


def register_process(
    ledger: ApprovalLedger,
    command: str,
    process_id: str | None = None,
    log_path: str | None = None,
    *,
    kind: str = "agent_run",
) -> SupervisedProcess:
    """Insert this process into the process table as ``running`` (with where it logs).

    ``kind`` says what it is in the processes pane (``agent_run``, ``acp``...).
    """
    now = datetime.now(UTC)
    record = ProcessRecord(
        process_id=process_id or f"run-{uuid.uuid4().hex[:12]}",
        kind=kind,
        pid=os.getpid(),
        host=socket.gethostname(),
        command=command,
        status="running",
        started_at=now,
        heartbeat_at=now,
        log_path=str(Path(log_path).resolve()) if log_path else None,
    )
    ledger.upsert_process(record)
    return SupervisedProcess(ledger, record.process_id)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM/SIGINT into :class:`RunStopped` in the main thread for the block."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise RunStopped(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def drive(
    agent: MemAgent,
    text: str,
    process: SupervisedProcess,
    echo: Echo,
    *,
    thread_id: str | None = None,
    decision_timeout: float = 24 * 3600,
) -> RunResult | None:
    """Run ``text``, wait for each decision and resume until the run stops pausing.

    Returns:
        The last run result, or ``None`` when a decision never came or the model did not go on.
    """
    result = agent.run(text, thread_id=thread_id)
    echo(f"[run] {result.status} (thread {result.thread_id})")
    return follow_pauses(agent, result, process, echo, decision_timeout=decision_timeout)


def follow_pauses(
    agent: MemAgent,
    result: RunResult,
    process: SupervisedProcess,
    echo: Echo,
    *,
    decision_timeout: float = 24 * 3600,
) -> RunResult | None:
    """While ``result`` awaits approval: record the waits, wait for each decision, resume.

    Returns:
        The last run result, or ``None`` when a decision never came or the model did not go on.
    """
    while result.status == "awaiting_approval":
        continued: RunResult | None = None
        process.ledger.record_waiters(process.process_id, [p.proposal_id for p in result.proposals])
        for proposal in result.proposals:
            process.wait_status(proposal.tool_name)
            echo(f"[run] waiting for a decision on {proposal.proposal_id} ({proposal.tool_name})")
            decided = agent.wait_for_decision(proposal.proposal_id, timeout=decision_timeout)
            if decided.status.value == "pending":
                echo(f"[run] no decision on {proposal.proposal_id} in {decision_timeout:g}s")
                return None
            process.set_status("running")
            if decided.proposal_id != proposal.proposal_id:  # followed the edit chain
                echo(f"[run] edited by a human: {proposal.proposal_id} -> {decided.proposal_id}")
            resumed = agent.resume_approval(decided.proposal_id, continue_model=True)
            answer = resumed.assistant_response or resumed.error_code or ""
            echo(f"[run] {decided.status.value}: {answer}".rstrip())
            continued = resumed.run or continued
        if continued is None:
            return None
        result = continued
    return result


def record_restart(agent: MemAgent, reference: str, *, allow: bool = True) -> None:
    """Save the agent with the factory that builds it again, so its orphans can be resumed.

    The agent keeps the reference in its configuration (a later ``save()`` keeps it too). With
    ``allow``, the factory is also added to the operator's resume allowlist: naming it on the
    command line is the review (:mod:`supervisor.runtime.allowlist`).
    """
    from supervisor.runtime.allowlist import add_reference

    config = agent.config.model_copy(update={"restart_factory": reference})
    agent.context = dataclasses.replace(agent.context, config=config)
    agent.save()
    if allow:
        try:
            add_reference(reference)
        except OSError:
            pass  # a read-only config folder: resumes then need --allow or the file fixed


def model_of(agent: MemAgent) -> str:
    """The model an agent asks (what a ``model_call`` step names)."""
    return str(agent.config.llm.get("model") or "the model")


def error_lines(status: str, error: Mapping[str, Any] | None) -> list[str]:
    """A stopped run's error as a person reads it: ``[run] failed [code]: message`` and a hint."""
    if not error:
        return [f"[run] {status}"]
    lines = [f"[run] {status} [{error.get('code', 'error')}]: {error.get('message', '')}"]
    if error.get("hint"):
        lines.append(f"  {error['hint']}")
    return lines


def run_supervised(
    reference: str,
    text: str,
    *,
    command: str,
    echo: Echo,
    thread_id: str | None = None,
    process_id: str | None = None,
    decision_timeout: float = 24 * 3600,
    log_path: str | None = None,
) -> int:
    """Build the agent, record the process, run it under supervision and record the exit.

    Returns:
        0 when the run completed, 1 when it failed or was left waiting, 143 when stopped.
    """
    agent = build_agent(reference)
    record_restart(agent, reference)
    process = register_process(agent.ledger, command, process_id, log_path=log_path)
    echo(f"[run] process {process.process_id} (pid {os.getpid()}) on {agent.provider.url}")
    exit_code = 1
    status = "exited"
    try:
        with stop_on_signals(), process.heartbeats(), process.reporting_steps(model_of(agent)):
            result = drive(
                agent, text, process, echo, thread_id=thread_id, decision_timeout=decision_timeout
            )
        if result is not None and result.status == "completed":
            exit_code = 0
            echo(f"[run] completed: {result.output or ''}".rstrip())
        elif result is not None:
            for line in error_lines(result.status, result.error):
                echo(line)
    except RunStopped as stopped:
        echo(f"[run] stopped by {stopped}")
        status, exit_code = "stopped", STOPPED_EXIT_CODE
    finally:
        process.set_status(status, exit_code)
    return exit_code
