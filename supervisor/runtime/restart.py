"""Resume from anywhere: drive an approved proposal to its end when its agent process is gone.

``supervisor resume PROPOSAL_ID`` re-creates the proposal's agent from what the ledger holds and
the operator allows (:mod:`supervisor.runtime.allowlist`): the factory ``supervisor run``
recorded for it, else the saved configuration with its tools rebound from their import
references. It then runs as a supervised process (a process row with a lease, which the TUI
follows and stops): it claims the call once, runs it, records the outcome and, by default,
continues the model turn to its end, waiting for any further decisions as ``supervisor run``
does.

Exactly one resumer runs a call: a ``resume:<proposal>`` lease is taken before anything is
built, so a second resumer is told which process has it; the ledger's claim is the last word
either way (a call claimed once is never run again).
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervisor.errors import (
    ReferenceMismatch,
    ReferenceNotAllowed,
    SupervisorError,
    UnknownToolError,
)
from supervisor.ledger.chain import live_end
from supervisor.ledger.errors import LeaseHeld, LedgerError
from supervisor.ledger.liveness import pid_running
from supervisor.ledger.models import ProcessRecord, Proposal, ProposalStatus, ProposalWaiter
from supervisor.runtime.agent import MemAgent
from supervisor.runtime.allowlist import allowlist_path, is_allowed
from supervisor.runtime.config import AgentConfig
from supervisor.runtime.host import (
    STOPPED_EXIT_CODE,
    Echo,
    RunStopped,
    SupervisedProcess,
    build_agent,
    follow_pauses,
    record_restart,
    register_process,
    stop_on_signals,
)
from supervisor.runtime.turn_lease import keep_renewed

if TYPE_CHECKING:
    from supervisor.ledger.models import Lease
    from supervisor.ledger.service import ApprovalLedger
    from supervisor.store.provider import SQLModelProvider

_S = ProposalStatus

#: Statuses a resume acts on: it runs an approved call, or tells the model a decision or a
#: reconciliation and continues the turn.
RESUMABLE = frozenset({_S.APPROVED, _S.REJECTED, _S.CANCELLED, _S.EXPIRED, _S.EXECUTED, _S.FAILED})


class NotResumable(SupervisorError, RuntimeError):
    """The proposal's agent cannot be re-created here (nothing allowlisted rebuilds it)."""

    code = "not_resumable"


class ResumeRefused(SupervisorError, RuntimeError):
    """Resuming now would be wrong: undecided, a live process waits on it, or it is being
    resumed by another process."""

    code = "resume_refused"


def resume_resource(proposal_id: str) -> str:
    """The lease a resumer holds on a proposal while it drives it."""
    return f"resume:{proposal_id}"


def _rebind_hint(error: SupervisorError) -> str:
    reference = error.details.get("reference")
    if isinstance(error, ReferenceNotAllowed) and reference:
        return f"Review {reference}, then `supervisor allowlist add {reference}` and resume again."
    if isinstance(error, UnknownToolError):
        return (
            "The tool is defined where it cannot be imported (a closure or lambda): give the "
            "agent a zero-argument factory and run it with `supervisor run MODULE:FACTORY`, "
            "resume it from your own code with MemAgent.load(..., tools=[...]), or reject it."
        )
    return "Reject or cancel the proposal and run the call again with the current tool."


def _external_runtime_hint(proposal: Proposal) -> str | None:
    """What to do with an orphan of an agent this SDK did not build (``None`` for our own)."""
    runtime = proposal.runtime
    if runtime == "claude-code":
        return (
            "Its hook is gone, so approving runs nothing: cancel it "
            f"(`supervisor proposals cancel {proposal.proposal_id}`); Claude Code asks again "
            "when the call is made again."
        )
    if runtime.startswith("mcp:") and proposal.owner.startswith("mcp-gateway:"):
        return (
            "Send the call again through `supervisor mcp-gateway`: the identical call joins this "
            "proposal and, once approved, runs once. Or cancel it."
        )
    if runtime.startswith("acp:"):
        return (
            "The ACP session ended with its relay: cancel it "
            f"(`supervisor proposals cancel {proposal.proposal_id}`)."
        )
    return None


def check_rebuildable(
    ledger: ApprovalLedger, proposal: Proposal, allowlist: frozenset[str]
) -> AgentConfig:
    """What :func:`rebuild_agent` will need, checked without importing anything.

    The TUI asks this before an approve and resume, so an agent that cannot be re-created is
    reported (with the fix) before anything is decided.

    Raises:
        NotResumable: The agent is not saved, or its factory or a tool reference is not on the
            allowlist (or a tool has none).
    """
    owner = proposal.owner
    record = ledger.load_agent(owner)
    if record is None and (hint := _external_runtime_hint(proposal)) is not None:
        raise NotResumable(
            f"Proposal {proposal.proposal_id} was asked for by {proposal.runtime} "
            f"({owner or 'no agent id'}), which runs the call itself, so no supervisor can "
            "resume it.",
            hint=hint,
            agent=owner,
        )
    if record is None:
        raise NotResumable(
            f"Proposal {proposal.proposal_id} was made by agent {owner!r}, which is not saved in "
            "this ledger, so nothing can re-create it.",
            hint="Start such agents with `supervisor run MODULE:FACTORY` (it records how to "
            "restart them) or save them with build_and_save(); resume this call from your own "
            "code (MemAgent.load(...).resume_approval(...)), or reject it.",
            agent=owner,
        )
    config = AgentConfig.model_validate(record.config)
    factory = config.restart_factory
    if factory is not None:
        if not is_allowed(factory, allowlist):
            raise NotResumable(
                f"Agent {owner!r} is restarted by its factory {factory!r}, which is not on the "
                f"resume allowlist ({allowlist_path()}), so it was not imported.",
                hint=f"Review {factory}, then `supervisor allowlist add {factory}` (or pass "
                f"--allow {factory}) and resume again.",
                agent=owner,
                reference=factory,
            )
        return config
    for tool in config.tools:
        if tool.import_ref is None:
            raise NotResumable(
                f"Agent {owner!r} cannot be re-created: its tool {tool.name!r} has no import "
                "reference.",
                hint=_rebind_hint(UnknownToolError(tool.name)),
                agent=owner,
            )
        if not is_allowed(tool.import_ref, allowlist):
            raise NotResumable(
                f"Agent {owner!r} cannot be re-created: its tool {tool.name!r} comes from "
                f"{tool.import_ref!r}, which is not on the resume allowlist ({allowlist_path()}).",
                hint=_rebind_hint(ReferenceNotAllowed(tool.import_ref, reference=tool.import_ref)),
                agent=owner,
                reference=tool.import_ref,
            )
    return config


def rebuild_agent(
    provider: SQLModelProvider, proposal: Proposal, allowlist: frozenset[str]
) -> MemAgent:
    """The proposal's agent, re-created from the ledger and the allowlist only.

    Raises:
        NotResumable: The agent is not saved, its factory or a tool reference is not on the
            allowlist, a tool cannot be rebound, or the factory builds another agent.
    """
    owner = proposal.owner
    config = check_rebuildable(provider.ledger, proposal, allowlist)
    factory = config.restart_factory
    if factory is not None:
        agent = build_agent(factory)
        if agent.agent_id != owner:
            raise NotResumable(
                f"The factory {factory!r} now builds agent {agent.agent_id!r}, not {owner!r}.",
                hint="Resume from code that builds the original agent, or reject the proposal.",
                agent=owner,
            )
        record_restart(agent, factory, allow=False)  # a factory that saves keeps the recipe
        if agent.provider.url != provider.url:
            raise NotResumable(
                f"The factory {factory!r} builds its agent on another ledger "
                f"({agent.provider.url}).",
                hint="Let the factory's SQLModelProvider() read SUPERVISOR_DB (no fixed URL).",
                agent=owner,
            )
        return agent
    try:
        return MemAgent.load(owner, memory_provider=provider, allowlist=allowlist)
    except (ReferenceNotAllowed, ReferenceMismatch, UnknownToolError) as error:
        raise NotResumable(
            f"Agent {owner!r} cannot be re-created: {error.message}",
            hint=_rebind_hint(error),
            agent=owner,
            cause=error.code,
        ) from error


def check_resumable(ledger: ApprovalLedger, proposal_id: str, holder: str) -> Proposal:
    """The proposal a resume of ``proposal_id`` acts on (the live end of its edit chain).

    Raises:
        ProposalNotFound: No such proposal.
        ResumeRefused: It is still pending, executing, or a live process other than ``holder``
            waits on it (that process runs it).
    """
    proposal = live_end(ledger, proposal_id)
    if proposal.status is _S.PENDING:
        raise ResumeRefused(
            f"Proposal {proposal.proposal_id} is still pending; nothing to resume yet.",
            hint=f"Decide it first: supervisor proposals approve {proposal.proposal_id}.",
            status=proposal.status.value,
        )
    if proposal.status is _S.NEEDS_RECONCILIATION:
        raise ResumeRefused(
            f"Proposal {proposal.proposal_id}'s call stopped mid-run; nobody knows whether it "
            "took effect, so it is never run again.",
            hint=f"Check, then record it: supervisor proposals reconcile {proposal.proposal_id} "
            '--as executed|failed --reason "what you checked"; then resume to continue the '
            "thread.",
            status=proposal.status.value,
        )
    if proposal.status not in RESUMABLE:
        raise ResumeRefused(
            f"Proposal {proposal.proposal_id} is {proposal.status.value}; a resume cannot act "
            "on it.",
            hint="An executing call is being run (or, if its process died, will need "
            f"reconciliation: supervisor proposals show {proposal.proposal_id}).",
            status=proposal.status.value,
        )
    if proposal.status in (_S.EXECUTED, _S.FAILED) and _turn_went_on(ledger, proposal):
        execution = ledger.execution(proposal.proposal_id)
        ran = ""
        if execution is not None:
            who = execution.executor
            ran = (
                f" by {who.executor_id} (pid {who.pid} on {who.host}) at "
                f"{execution.started_at.isoformat()}"
            )
        raise ResumeRefused(
            f"Proposal {proposal.proposal_id} was already {proposal.status.value}{ran}, and its "
            "run went on; nothing was run again.",
            hint=f"See its outcome: supervisor proposals show {proposal.proposal_id}.",
            status=proposal.status.value,
        )
    _check_resume_lease(ledger, proposal.proposal_id, holder)
    waiter = ledger.waiters([proposal.proposal_id]).get(proposal.proposal_id)
    if waiter is not None and _waiting(waiter) and waiter.process_id != holder:
        where = ""
        if waiter.process is not None:
            where = f" (pid {waiter.process.pid} on {waiter.process.host})"
        raise ResumeRefused(
            f"Process {waiter.process_id}{where} is waiting on proposal {proposal.proposal_id} "
            "and runs it itself.",
            hint="Nothing to do: that process goes on once the proposal is decided.",
            process_id=waiter.process_id,
        )
    return proposal


def _pid_alive_here(process: ProcessRecord) -> bool:
    """False only for a process of this host whose pid is gone (SIGKILLed: gone at once, not
    only at its lease deadline)."""
    return process.pid is None or process.host != socket.gethostname() or pid_running(process.pid)


def _process_row(ledger: ApprovalLedger, process_id: str) -> ProcessRecord | None:
    return next((p for p in ledger.list_processes() if p.process_id == process_id), None)


def _holder_text(holder: str, process: ProcessRecord | None) -> str:
    return holder if process is None else f"{holder} (pid {process.pid} on {process.host})"


def _check_resume_lease(ledger: ApprovalLedger, proposal_id: str, holder: str) -> None:
    """Refuse while another live resumer holds ``resume:<proposal_id>``; free it if its holder
    died (a SIGKILLed resume on this host, a process past its lease elsewhere)."""
    resource = resume_resource(proposal_id)
    lease = ledger.get_lease(resource)
    now = ledger.clock.now()
    if lease is None or lease.holder == holder or lease.expires_at < now:
        return
    process = _process_row(ledger, lease.holder)
    if process is not None and not (process.alive_at(now) and _pid_alive_here(process)):
        ledger.release_lease(resource, lease.holder)  # its holder is gone; ours to take
        return
    raise ResumeRefused(
        f"Proposal {proposal_id} is being resumed by {_holder_text(lease.holder, process)}.",
        hint="Follow that process in the TUI's processes pane; nothing was run here.",
        holder=lease.holder,
    )


def _waiting(waiter: ProposalWaiter) -> bool:
    """Whether the waiter may still run the proposal: its lease holds and its pid lives."""
    return waiter.alive and (waiter.process is None or _pid_alive_here(waiter.process))


def _turn_went_on(ledger: ApprovalLedger, proposal: Proposal) -> bool:
    """True once the proposal's thread has a newer checkpoint than the one it paused."""
    if proposal.thread_id is None or proposal.checkpoint_id is None:
        return True
    latest = ledger.latest_checkpoint(proposal.owner, proposal.thread_id)
    return latest is None or latest.checkpoint_id != proposal.checkpoint_id


@contextmanager
def resume_lease(ledger: ApprovalLedger, proposal_id: str, holder: str) -> Iterator[Lease]:
    """Hold ``resume:<proposal_id>`` for the block (renewed), or :class:`ResumeRefused`."""
    resource = resume_resource(proposal_id)
    try:
        lease = ledger.acquire_lease(resource, holder)
    except LeaseHeld as held:
        raise ResumeRefused(
            f"Proposal {proposal_id} is being resumed by "
            f"{_holder_text(held.holder, _process_row(ledger, held.holder))}.",
            hint="Follow that process in the TUI's processes pane; nothing was run here.",
            holder=held.holder,
        ) from None
    stop = threading.Event()
    keeper = threading.Thread(
        target=keep_renewed, args=(ledger, lease, stop), daemon=True, name="resume-lease"
    )
    keeper.start()
    try:
        yield lease
    finally:
        stop.set()
        keeper.join(timeout=5)
        try:
            ledger.release_lease(resource, holder)
        except LedgerError:
            pass  # unreleased, it runs out at its deadline


@dataclass(frozen=True)
class ResumeRequest:
    """What ``supervisor resume`` was asked to do."""

    proposal_id: str
    command: str
    continue_model: bool = True
    process_id: str | None = None
    decision_timeout: float = 24 * 3600.0
    allowlist: frozenset[str] = frozenset()


def resume_supervised(provider: SQLModelProvider, request: ResumeRequest, echo: Echo) -> int:
    """Resume one proposal as a supervised process; returns the process's exit code.

    0: the call was acted on and the run completed (or ``--no-continue-model``); 1: the run
    failed, was left waiting, or the call was refused; 143: stopped.

    Raises:
        ProposalNotFound, ResumeRefused, NotResumable: Nothing was run.
    """
    ledger = provider.ledger
    process_id = request.process_id or f"resume-{uuid.uuid4().hex[:12]}"
    holder = process_id
    proposal = check_resumable(ledger, request.proposal_id, process_id)
    with resume_lease(ledger, proposal.proposal_id, holder):
        proposal = check_resumable(ledger, proposal.proposal_id, process_id)  # under the lease
        agent = rebuild_agent(provider, proposal, request.allowlist)
        process = register_process(agent.ledger, request.command, process_id)
        agent.ledger.record_waiters(process.process_id, [proposal.proposal_id])
        echo(
            f"[resume] process {process.process_id} (pid {os.getpid()}) resumes "
            f"{proposal.proposal_id} ({proposal.tool_name}, {proposal.status.value}) of agent "
            f"{agent.agent_id}"
        )
        exit_code, status = 1, "exited"
        try:
            with stop_on_signals(), process.heartbeats():
                exit_code = _drive(agent, proposal, request, process, echo)
        except RunStopped as stopped:
            echo(f"[resume] stopped by {stopped}")
            status, exit_code = "stopped", STOPPED_EXIT_CODE
        finally:
            process.set_status(status, exit_code)
    return exit_code


def _drive(
    agent: MemAgent,
    proposal: Proposal,
    request: ResumeRequest,
    process: SupervisedProcess,
    echo: Echo,
) -> int:
    resumed = agent.resume_approval(proposal.proposal_id, continue_model=request.continue_model)
    if resumed.error_code in ("approval_already_decided", "already_consumed") and (
        resumed.run is None
    ):
        execution = agent.ledger.execution(proposal.proposal_id)
        if execution is not None:
            who = execution.executor
            echo(
                f"[resume] {proposal.proposal_id} was already run by {who.executor_id} (pid "
                f"{who.pid} on {who.host}) at {execution.started_at.isoformat()}; not run again"
            )
    answer = resumed.error_code or ("ok" if resumed.ok else "")
    echo(f"[resume] {resumed.proposal.status.value}: {answer}".rstrip())
    if resumed.turn_holder is not None:
        echo(f"[resume] the model turn is being continued by {resumed.turn_holder}")
    if not request.continue_model or resumed.run is None:
        ran = resumed.proposal.status in (_S.EXECUTED, _S.FAILED) and resumed.outcome is not None
        return 0 if ran or resumed.error_code in _DECIDED else 1
    result = follow_pauses(
        agent, resumed.run, process, echo, decision_timeout=request.decision_timeout
    )
    if result is not None and result.status == "completed":
        echo(f"[resume] completed: {result.output or ''}".rstrip())
        return 0
    if result is not None:
        echo(f"[resume] {result.status}: {result.error or ''}")
    return 1


#: A resume that told the model a human decision (nothing to run) did its job.
_DECIDED = frozenset({"denied", "cancelled", "expired"})
