"""The ledger side of the Claude Code hook: propose, wait, claim, and record the outcome.

A ``PreToolUse`` call is proposed with ``runtime="claude-code"``; the stored policy (a rule or
a grant) decides it at once, or it waits for a person (TUI, CLI, web page) for at most the
hook's budget. An approval is claimed before the answer is ``allow``, so the ledger shows the
call consumed (``executing``) while Claude Code runs it; an operator's edit is followed to the
edited proposal and answered with its arguments. Every other ending (rejected, expired,
cancelled, no decision in time, a claim refused) is a ``deny`` with the reason. ``PostToolUse``
finds the executing call by session and tool-use id and records the tool's result, redacted and
bounded, as a blob the execution points to.

Claude Code's tools carry no schema in the hook event, so a tool's schema hash is the hash of
``{"runtime": "claude-code", "tool": NAME}`` (:func:`schema_hash`): stable across versions of
Claude Code, and distinct from any SDK tool of the same name.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any

from supervisor.canonical import args_hash, canonical_hash, normalise
from supervisor.claude_code.answers import Allow, Answer, Deny
from supervisor.claude_code.events import HookEvent
from supervisor.claude_code.transcript import turn_of
from supervisor.ledger.chain import live_end
from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import (
    Execution,
    ExecutorIdentity,
    ProcessStep,
    Proposal,
    ProposalStatus,
    TraceEvent,
)
from supervisor.ledger.service import ApprovalLedger
from supervisor.outcomes.blobref import BlobRef
from supervisor.outcomes.legacy import infer_outcome
from supervisor.redact import redact_value

_S = ProposalStatus

#: The runtime (and owner) every Claude Code proposal records.
RUNTIME = "claude-code"
#: Who cancels a call whose hook stopped waiting.
HOOK_ACTOR = "claude-code-hook"
#: Claude Code's tools that only read: proposed with ``read_only`` (rules default to allow).
READ_ONLY_TOOLS = frozenset(
    {"Read", "Glob", "Grep", "LS", "NotebookRead", "TodoRead", "TodoWrite", "BashOutput"}
)
#: The largest tool result stored as an outcome; a larger one is cut (and says so).
MAX_RESULT_CHARS = 64 * 1024
#: Shells Claude Code may start the hook through (their parent is Claude Code itself).
_SHELLS = frozenset({"sh", "bash", "dash", "zsh"})

Waiting = Callable[[Proposal], AbstractContextManager[None]]
"""Entered while the hook waits on a pending proposal (the supervised-process record)."""


def schema_hash(tool_name: str) -> str:
    """The stable schema hash of a Claude Code tool: its name and the runtime, hashed."""
    return canonical_hash({"runtime": RUNTIME, "tool": tool_name})


def execution_target(event: HookEvent) -> dict[str, Any]:
    """Where the call runs: Claude Code, in its working directory."""
    return {"runtime": RUNTIME, "cwd": event.cwd}


def claude_pid() -> int:
    """The Claude Code process that started this hook (through a shell, or directly)."""
    parent = os.getppid()
    try:
        comm = Path(f"/proc/{parent}/comm").read_text().strip()
        if comm in _SHELLS:
            stat = Path(f"/proc/{parent}/stat").read_text()
            return int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return parent


def executor_for(event: HookEvent) -> ExecutorIdentity:
    """Claude Code runs the claimed call: the execution names its process, so recovery flags
    the call only once that process is gone (never while the tool may still be running)."""
    return ExecutorIdentity(
        executor_id=f"{RUNTIME}:{event.session_id}"[:200],
        pid=claude_pid(),
        host=socket.gethostname(),
    )


def gate(
    ledger: ApprovalLedger,
    event: HookEvent,
    *,
    wait_seconds: float,
    waiting: Waiting | None = None,
) -> Answer:
    """Propose the call, let the policy or a person decide, and say what Claude Code does.

    Args:
        ledger: The ledger holding the policy and the proposals.
        event: A ``PreToolUse`` or ``PermissionRequest`` event.
        wait_seconds: How long a pending call may wait for a decision (also its TTL).
        waiting: Entered while waiting (records the session as a supervised process).

    Returns:
        ``Allow`` (the approval claimed; ``updated_input`` after an edit) or ``Deny``.
    """
    proposal = ledger.propose(
        event.tool_name,
        schema_hash(event.tool_name),
        event.tool_input,
        execution_target=execution_target(event),
        policy_reason=f"Claude Code wants to run {event.tool_name}",
        owner=RUNTIME,
        thread_id=event.session_id,
        call_id=event.tool_use_id,
        ttl_seconds=max(wait_seconds, 1.0),
        read_only=event.tool_name in READ_ONLY_TOOLS,
        runtime=RUNTIME,
        turn_id=turn_of(event.transcript_path, event.tool_use_id),
    )
    original_id = proposal.proposal_id
    if proposal.status is _S.PENDING:
        try:
            with (waiting or _no_wait)(proposal):
                proposal = ledger.wait_decided(original_id, wait_seconds)
        except BaseException:  # stopped (SIGTERM) or failed mid-wait: nobody will run it
            with suppress(Exception):  # the ledger may be what failed; the TTL still ends it
                _give_up(ledger, live_end(ledger, original_id), "The hook stopped waiting.")
            raise
        if proposal.status is _S.PENDING:
            why = f"No decision within the Claude Code hook's {wait_seconds:g} s wait."
            proposal = _give_up(ledger, proposal, why)
    return settle(ledger, event, original_id, proposal)


def _no_wait(proposal: Proposal) -> AbstractContextManager[None]:
    return nullcontext()


def _give_up(ledger: ApprovalLedger, proposal: Proposal, why: str) -> Proposal:
    """Cancel a call the hook no longer waits on, so nobody approves a call that will not run.

    A decision that lands in the same moment wins: the call's live end is returned as it is.
    """
    if proposal.status is not _S.PENDING:
        return proposal
    try:
        return ledger.cancel(proposal.proposal_id, HOOK_ACTOR, why)
    except LedgerError:
        return live_end(ledger, proposal.proposal_id)


def settle(
    ledger: ApprovalLedger, event: HookEvent, original_id: str, proposal: Proposal
) -> Answer:
    """The answer for a call whose live end is ``proposal``: claim an approval, else deny."""
    if proposal.status is _S.APPROVED:
        return _claim(ledger, event, original_id, proposal)
    return Deny(denial(proposal))


def _claim(
    ledger: ApprovalLedger, event: HookEvent, original_id: str, proposal: Proposal
) -> Deny | Allow:
    edited = proposal.proposal_id != original_id
    # What Claude Code will run: the edited arguments, or its own input (normalised as the
    # ledger stored it, so the hash binds the call itself and not its number formatting).
    arguments = proposal.arguments if edited else normalise(dict(event.tool_input))
    expected = args_hash(
        event.tool_name, schema_hash(event.tool_name), arguments, execution_target(event)
    )
    try:
        ledger.claim(proposal.proposal_id, expected, executor_for(event))
    except LedgerError as error:
        return Deny(
            f"The supervisor could not claim the approval of this call ({error.code}): "
            f"{error.message} The call did not run."
        )
    who = proposal.decided_by or proposal.approver_id or "the supervisor"
    if edited:
        return Allow(
            f"Approved by {who} with edited arguments (proposal {proposal.proposal_id}).",
            updated_input=dict(proposal.arguments),
        )
    return Allow(f"Approved by {who} (proposal {proposal.proposal_id}).")


def denial(proposal: Proposal) -> str:
    """What the model is told about a call the supervisor did not let run."""
    reason = f" Reason: {proposal.decision_reason}" if proposal.decision_reason else ""
    pid = proposal.proposal_id
    match proposal.status:
        case _S.REJECTED if proposal.decided_by_rule is not None:
            text = f"The supervisor's policy denied this call ({proposal.decided_by})."
        case _S.REJECTED:
            text = f"A human reviewer ({proposal.approver_id}) rejected this call."
        case _S.EXPIRED:
            text = "Nobody approved this call before it expired."
        case _S.CANCELLED:
            text = "This call was cancelled before it ran."
        case _S.SUPERSEDED:
            text = "This call was replaced by an edit that cannot be read."
        case _S.PENDING:
            text = "No decision on this call arrived in time."
        case _:
            text = f"This call is {proposal.status.value}, not approved."
    return f"{text} It did not run (supervisor proposal {pid}).{reason}"


# -- outcomes ---------------------------------------------------------------------------------


def executing_call(ledger: ApprovalLedger, event: HookEvent) -> Proposal | None:
    """The executing proposal of this session's tool-use id, or ``None`` (never claimed).

    A call claimed from a ``PermissionRequest`` (which carries no tool-use id) is found by its
    tool and exact arguments instead, newest first.
    """
    same_call: Proposal | None = None
    arguments = canonical_hash(event.tool_input)
    cursor: str | None = None
    while True:
        page = ledger.list(
            status=_S.EXECUTING, thread_id=event.session_id, runtime=RUNTIME, limit=200,
            cursor=cursor, newest_first=True,
        )  # fmt: skip
        for proposal in page.items:
            if event.tool_use_id and proposal.call_id == event.tool_use_id:
                return proposal
            if (
                same_call is None
                and proposal.call_id is None
                and proposal.tool_name == event.tool_name
                and canonical_hash(proposal.arguments) == arguments
            ):
                same_call = proposal
        if page.next_cursor is None:
            return same_call
        cursor = page.next_cursor


def bounded_result(value: Any) -> str:
    """The tool result as JSON with likely secrets redacted, cut to :data:`MAX_RESULT_CHARS`."""
    text = json.dumps(redact_value(value), ensure_ascii=False, default=str)
    if len(text) <= MAX_RESULT_CHARS:
        return text
    cut = {"truncated_from_chars": len(text), "prefix": text[:MAX_RESULT_CHARS]}
    return json.dumps(cut, ensure_ascii=False)


def record_outcome(ledger: ApprovalLedger, event: HookEvent) -> Execution | None:
    """Record a ``PostToolUse`` (or ``PostToolUseFailure``) as the claimed call's outcome.

    Returns:
        The finished execution, or ``None`` when the call was never claimed through the hook
        (a tool the hook's matcher does not cover, or one already finished).
    """
    proposal = executing_call(ledger, event)
    if proposal is None:
        return None
    failed = event.hook_event_name == "PostToolUseFailure"
    result = event.error if failed else event.tool_response
    stored = ledger.put_blob(bounded_result(result).encode("utf-8"), "application/json")
    ref = BlobRef(stored.sha256).result_ref
    if failed:
        reason = bounded_result(event.error)[:500]
        execution = ledger.fail(proposal.proposal_id, "error", reason, result_ref=ref)
        status = "error"
    else:
        status = infer_outcome(event.tool_response).status.value
        execution = ledger.complete(proposal.proposal_id, status, ref)
    ledger.append_trace(
        [
            TraceEvent(
                at=ledger.clock.now(), agent_id=RUNTIME, thread_id=event.session_id,
                run_id=proposal.turn_id, kind="tool_result", tool=event.tool_name,
                outcome_status=status, blob_ref=ref,
                payload={"call_id": event.tool_use_id, "proposal_id": proposal.proposal_id},
            )
        ]
    )  # fmt: skip
    return execution


@contextmanager
def supervised_wait(ledger: ApprovalLedger, event: HookEvent, proposal: Proposal) -> Iterator[None]:
    """Show the session as a supervised process (kind ``claude-code``) waiting on the call.

    The row is the waiting hook (stopping it denies the call): one per waiting call, since
    Claude Code may run a turn's calls, and so their hooks, in parallel. Its id and command
    name the session, the command also Claude Code's pid and working directory; it heartbeats
    while the hook waits and says ``exited`` after.
    """
    from supervisor.runtime.host import register_process

    call = event.tool_use_id or f"pid{os.getpid()}"
    process = register_process(
        ledger,
        f"claude-code session {event.session_id} {event.tool_name} {call} "
        f"(claude pid {claude_pid()}, cwd {event.cwd})",
        process_id=f"claude-code-{event.session_id}-{call}"[:200],
        kind=RUNTIME,
    )
    ledger.record_waiters(process.process_id, [proposal.proposal_id])
    step = ProcessStep(
        kind="waiting_for_approval", detail=event.tool_name, since=ledger.clock.now()
    )
    ledger.heartbeat(process.process_id, status="waiting_for_approval", step=step)
    try:
        with process.heartbeats():
            yield
    finally:
        process.set_status("exited", 0)
