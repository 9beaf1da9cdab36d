"""Deciding and resuming proposals from their stored checkpoints, in any process."""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

from supervisor.canonical import args_hash
from supervisor.errors import model_error
from supervisor.ledger.chain import earlier_links, edit_note, live_end
from supervisor.ledger.errors import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ArgumentsMismatch,
    AuditMismatch,
    LedgerError,
)
from supervisor.ledger.models import (
    ExecutorIdentity,
    Proposal,
    ProposalStatus,
    ReconciledOutcome,
    Reconciliation,
)
from supervisor.outcomes import OutcomeRecord
from supervisor.outcomes.blobref import BlobRef
from supervisor.runtime.calls import deliver
from supervisor.runtime.context import RuntimeContext
from supervisor.runtime.engine import TurnEngine
from supervisor.runtime.errors import CheckpointMissing
from supervisor.runtime.llm import json_text, tool_message
from supervisor.runtime.pointers import pointer_scope
from supervisor.runtime.results import ApprovalResumeResult, refusal
from supervisor.runtime.state import PendingCall, RunState, load_state
from supervisor.runtime.trace import RunTracer
from supervisor.runtime.turn_lease import turn_lease
from supervisor.tools.errors import ToolCallError

if TYPE_CHECKING:
    from supervisor.ledger.models import Checkpoint

_S = ProposalStatus

#: What the model is told for a call that a decision stopped, by proposal status.
DECISIONS: dict[ProposalStatus, tuple[str, str]] = {
    _S.REJECTED: ("denied", "A human reviewer rejected this call; it did not run."),
    _S.CANCELLED: ("cancelled", "This call was cancelled before it ran."),
    _S.EXPIRED: ("expired", "Nobody approved this call before it expired; it did not run."),
    _S.SUPERSEDED: ("superseded", "A human replaced this call with edited arguments."),
    _S.NEEDS_RECONCILIATION: (
        "needs_reconciliation",
        "The process running this call stopped; whether it took effect is being checked by a "
        "human. Do not retry it.",
    ),
}

#: What the model is told once a human reconciled a call whose process stopped mid-call.
RECONCILED: dict[ReconciledOutcome, str] = {
    "executed": "The process running this call stopped before recording its result. A human "
    "checked and found that it took effect; its result was not recorded. Do not run it again.",
    "failed": "The process running this call stopped before recording its result. A human "
    "checked and found that it did not take effect.",
}


def list_proposals(
    context: RuntimeContext, status: str | ProposalStatus | None, thread_id: str | None
) -> list[Proposal]:
    """Every proposal of the context's agent with that status (all pages), oldest first."""
    proposals: list[Proposal] = []
    cursor: str | None = None
    while True:
        page = context.ledger.list(
            status=status, owner=context.agent_id, thread_id=thread_id, limit=500, cursor=cursor
        )
        proposals.extend(page.items)
        if page.next_cursor is None:
            return proposals
        cursor = page.next_cursor


def proposal_to_run(context: RuntimeContext, proposal_id: str) -> Proposal:
    """The proposal that now stands for ``proposal_id``'s call, with its expiry applied.

    Follows ``superseded_by`` to the live end of the edit chain
    (:func:`~supervisor.ledger.chain.live_end`): an approved end is the one to claim and run,
    with *its* arguments; a pending end still waits; any other end is the decision the model is
    told. Every resumer (``resume_approval``, ``supervisor run``, the demo agents) calls this.
    """
    ledger = context.ledger
    proposal = live_end(ledger, proposal_id)
    if proposal.status in (_S.PENDING, _S.APPROVED) and proposal.expires_at <= ledger.clock.now():
        ledger.expire_due()
        proposal = ledger.get(proposal.proposal_id)
    return proposal


def wait_for_decision(context: RuntimeContext, proposal_id: str, timeout: float) -> Proposal:
    """Block on the ledger's change feed until the call's proposal leaves ``pending``.

    An edit does not end the wait: the edited proposal (the live end of the chain) is waited on
    in its turn, and the one returned is the decided end (its id differs from ``proposal_id``
    when the call was edited).
    """
    return context.ledger.wait_decided(proposal_id, timeout)


def _checkpoint_call(
    context: RuntimeContext, proposal: Proposal, read: Checkpoint | None = None
) -> tuple[Checkpoint, PendingCall]:
    """The proposal's checkpoint (``read`` when it is that one, else read now) and its call."""
    if read is not None and read.checkpoint_id == proposal.checkpoint_id:
        checkpoint: Checkpoint | None = read
    else:
        checkpoint = (
            context.ledger.load_checkpoint(proposal.checkpoint_id)
            if proposal.checkpoint_id
            else None
        )
    if checkpoint is None:
        raise CheckpointMissing(
            f"Proposal {proposal.proposal_id} has no stored checkpoint.",
            hint="Its run cannot be resumed; cancel the proposal.",
        )
    for raw in checkpoint.pending_tool_calls:
        call = PendingCall.model_validate(raw)
        if call.call_id == proposal.call_id:
            return checkpoint, call
    raise CheckpointMissing(
        f"Checkpoint {checkpoint.checkpoint_id} has no pending call {proposal.call_id!r}.",
        hint="Its run cannot be resumed; cancel the proposal.",
    )


def _decision_body(proposal: Proposal) -> dict[str, Any]:
    """What the model is told about a call a decision stopped: code, message, the reason."""
    code, message = DECISIONS[proposal.status]
    if proposal.status is _S.REJECTED and proposal.decided_by_rule is not None:  # a rule did
        message = f"The policy denied this call ({proposal.decided_by}); it did not run."
    reason = {"reason": proposal.decision_reason} if proposal.decision_reason else {}
    return model_error(code, message, **reason)


def _decision_result(proposal: Proposal) -> ApprovalResumeResult:
    code, _ = DECISIONS[proposal.status]
    evidence = {"status": code, "reason_code": code}
    return ApprovalResumeResult(
        proposal=proposal,
        tool_result=_decision_body(proposal),
        consumed=proposal.status.consumed,
        outcome=OutcomeRecord.of(proposal.tool_name, proposal.call_id or "", evidence),
        error_code=code,
    )


def _reconciled_body(found: Reconciliation, outcome: ReconciledOutcome) -> dict[str, Any]:
    """The tool message of a reconciled call: the human's finding, their reason, what it means."""
    return {"reconciled": outcome, "reason": found.reason, "message": RECONCILED[outcome]}


def _reconciled_result(
    proposal: Proposal, found: Reconciliation, outcome: ReconciledOutcome, tracer: RunTracer
) -> ApprovalResumeResult:
    """A call a human reconciled: nothing runs, the model will be told the finding."""
    evidence = {"status": "success" if outcome == "executed" else "error",
                "reason_code": f"reconciled_{outcome}"}  # fmt: skip
    tracer.event("approval", tool=proposal.tool_name, outcome_status="reconciled",
                 reason_code=evidence["reason_code"], proposal_id=proposal.proposal_id)  # fmt: skip
    tracer.flush()
    return ApprovalResumeResult(
        proposal=proposal,
        tool_result=_reconciled_body(found, outcome),
        consumed=True,
        outcome=OutcomeRecord.of(proposal.tool_name, proposal.call_id or "", evidence),
        ok=outcome == "executed",
        error_code=None if outcome == "executed" else "reconciled_failed",
    )


def _finished_result(
    context: RuntimeContext, proposal: Proposal, tracer: RunTracer
) -> ApprovalResumeResult:
    """An executed or failed call: reconciled by a human, or run by an earlier resume."""
    found = context.ledger.reconciliation(proposal.proposal_id)
    if found is not None and found.outcome is not None:
        return _reconciled_result(proposal, found, found.outcome, tracer)
    stored = _stored_result(context, proposal)
    execution = context.ledger.execution(proposal.proposal_id)
    evidence = {"status": execution.outcome_status if execution else None}
    return ApprovalResumeResult(
        proposal=proposal, consumed=True, error_code="already_consumed",
        tool_result=None if stored is None else _parse(stored),
        outcome=OutcomeRecord.of(proposal.tool_name, proposal.call_id or "", evidence),
    )  # fmt: skip


def _recovered(context: RuntimeContext, proposal: Proposal) -> Proposal:
    """``proposal`` after recovery, when it is still marked executing: its executor may have
    died mid-call (then it is ``needs_reconciliation``, never run again)."""
    try:
        context.ledger.recover()
        return context.ledger.get(proposal.proposal_id)
    except LedgerError:
        return proposal


def _stored_result(context: RuntimeContext, proposal: Proposal) -> Any:
    content = context.ledger.stored_result(proposal.proposal_id)
    return None if content is None else content.decode("utf-8")


def _refuse_edit(
    context: RuntimeContext, proposal: Proposal, error: ToolCallError, tracer: RunTracer
) -> ApprovalResumeResult:
    """An approved edit the tool refuses (its schema): withdraw it, tell the model, run nothing.

    The approval is revoked with the tool's reason, so the call ends ``cancelled`` in the
    ledger instead of staying ``approved`` with nothing able to run it.
    """
    reason = f"the edited arguments do not fit the tool: {error.message}"[:500]
    with contextlib.suppress(LedgerError):  # decided or claimed meanwhile: report it as it is
        context.ledger.revoke(proposal.proposal_id, f"agent:{context.agent_id}", reason, via="sdk")
    current = context.ledger.get(proposal.proposal_id)
    tracer.event("approval", tool=proposal.tool_name, outcome_status="refused",
                 reason_code="edit_refused")  # fmt: skip
    tracer.flush()
    if current.status in DECISIONS:
        return _decision_result(current)
    return ApprovalResumeResult(
        proposal=current, consumed=current.status.consumed, error_code=error.code
    )


def _execute(
    context: RuntimeContext, proposal: Proposal, call: PendingCall, tracer: RunTracer
) -> ApprovalResumeResult:
    """Claim an approved proposal and run its tool exactly once."""
    ledger = context.ledger
    tool = context.tools.rebind(call.tool_name, None, call.schema_hash)
    edited = proposal.supersedes_id is not None
    source: Any = proposal.arguments if edited else call.arguments
    try:
        prepared = tool.prepare(source)
    except ToolCallError as error:
        if edited:
            return _refuse_edit(context, proposal, error, tracer)
        return ApprovalResumeResult(proposal=proposal, error_code=error.code)
    expected = args_hash(
        tool.name, tool.schema_hash, prepared.arguments, tool.execution_target or {}
    )
    executor = ExecutorIdentity.current(f"agent:{context.agent_id}")
    try:
        ledger.claim(proposal.proposal_id, expected, executor)
    except (ApprovalExpired, ArgumentsMismatch, AuditMismatch, ApprovalAlreadyDecided) as exc:
        current = ledger.get(proposal.proposal_id)
        if current.status in DECISIONS:
            return _decision_result(current)
        tracer.event("approval", tool=tool.name, outcome_status="refused", reason_code=exc.code)
        tracer.flush()
        return ApprovalResumeResult(
            proposal=current, consumed=current.status.consumed, error_code=exc.code
        )
    delivery = deliver(context, tool.name, call.call_id, tool.execute(prepared, approved=True))
    result, content, blob_ref = delivery.result, delivery.content, delivery.blob_ref
    if edited:  # the delivered form (pointer or refusal for a large result), never more
        earlier = earlier_links(ledger, proposal)  # the model's own proposal first
        proposed = earlier[0].arguments if earlier else {}
        note = edit_note(proposed, prepared.arguments, edits=len(earlier))
        content = json_text({"edited_by_human": note, "result": _parse(content)})
    stored = ledger.blob_of(content.encode("utf-8"), "application/json")
    evidence = result.evidence()
    record = OutcomeRecord.of(tool.name, call.call_id, evidence)
    tracer.event(
        "tool_result", tool=tool.name, outcome_status=evidence["status"],
        reason_code=evidence["reason_code"], blob_ref=blob_ref, call_id=call.call_id,
        proposal_id=proposal.proposal_id, outcome=evidence,
    )  # fmt: skip
    # One commit: the outcome, the result blob it points at and the trace event reporting it.
    if result.error is None:
        finished = ledger.complete(
            proposal.proposal_id, evidence["status"], BlobRef(stored.sha256).result_ref,
            executor=executor, blob=stored, trace=tracer.take(),
        )  # fmt: skip
    else:
        finished = ledger.fail(
            proposal.proposal_id, "error", result.error.code,
            result_ref=BlobRef(stored.sha256).result_ref, executor=executor, blob=stored,
            trace=tracer.take(),
        )  # fmt: skip
    # Claim and finish change only the status and updated_at of the proposal this resume
    # claimed (nobody else may move an executing proposal and then finish it): no re-read.
    status = _S.EXECUTED if result.error is None else _S.FAILED
    return ApprovalResumeResult(
        proposal=proposal.model_copy(update={"status": status, "updated_at": finished.finished_at}),
        tool_result=result.value,
        consumed=True,
        outcome=record,
        ok=result.ok,
        error_code=None if result.error is None else result.error.code,
    )


def resume(context: RuntimeContext, proposal_id: str, continue_model: bool) -> ApprovalResumeResult:
    """See :meth:`MemAgent.resume_approval`."""
    ledger = context.ledger
    # The common case in one read: a call never edited, not past its expiry. Anything else
    # (an edit chain to follow, an expiry to apply) goes the general way.
    proposal, read = ledger.get_with_checkpoint(proposal_id)
    if proposal.status is _S.SUPERSEDED or (
        proposal.status in (_S.PENDING, _S.APPROVED) and proposal.expires_at <= ledger.clock.now()
    ):
        proposal = proposal_to_run(context, proposal_id)
    if proposal.status is _S.EXECUTING:
        proposal = _recovered(context, proposal)
    checkpoint, call = _checkpoint_call(context, proposal, read)
    state = load_state(checkpoint.state)
    with pointer_scope(context.agent_id, checkpoint.thread_id, state.user_id):
        return _resume_checkpoint(context, proposal, checkpoint, call, state, continue_model)


def _resume_checkpoint(
    context: RuntimeContext,
    proposal: Proposal,
    checkpoint: Checkpoint,
    call: PendingCall,
    state: RunState,
    continue_model: bool,
) -> ApprovalResumeResult:
    ledger = context.ledger
    tracer = RunTracer(ledger, context.agent_id, checkpoint.thread_id, state.run_id)
    # Whether the paused turn may go on after this call: not while it awaits a human (pending,
    # or stopped mid-call and not yet reconciled) or still runs elsewhere (executing).
    continuable = True
    if proposal.status is _S.APPROVED:
        result = _execute(context, proposal, call, tracer)
        continuable = result.error_code not in ("approval_pending", "already_consumed")
    elif proposal.status is _S.PENDING:
        result = ApprovalResumeResult(proposal=proposal, error_code="approval_pending")
        continuable = False
    elif proposal.status in DECISIONS:
        result = _decision_result(proposal)
        tracer.event("approval", tool=proposal.tool_name, outcome_status=result.error_code,
                     proposal_id=proposal.proposal_id, call_id=call.call_id)  # fmt: skip
        tracer.flush()
        continuable = proposal.status is not _S.NEEDS_RECONCILIATION
    elif proposal.status in (_S.EXECUTED, _S.FAILED):
        # Reconciled, or run by a resume that stopped before the model went on: the turn
        # continues (once: the turn lease and the newer checkpoint guard it); nothing re-runs.
        result = _finished_result(context, proposal, tracer)
    else:  # executing: its executor is alive and running it
        result = ApprovalResumeResult(
            proposal=proposal, consumed=True, error_code="already_consumed"
        )
        continuable = False
    if continue_model and continuable:
        with turn_lease(
            ledger, checkpoint.checkpoint_id, moved_on=lambda: _moved_on(context, checkpoint)
        ) as turn:
            if turn.lease is None:  # another process runs (or ran) this turn
                return result.model_copy(update={"turn_holder": turn.holder})
            messages = _continued_messages(context, checkpoint, state)
            if messages is not None:
                if result.outcome is not None:
                    state.outcomes.append(result.outcome)
                run = TurnEngine(context).run_loop(messages, state, tracer)
                return result.model_copy(update={"run": run, "assistant_response": run.output})
    return result


def _moved_on(context: RuntimeContext, checkpoint: Checkpoint) -> bool:
    """True once the thread has a newer checkpoint than ``checkpoint`` (its turn went on)."""
    latest = context.ledger.latest_checkpoint(context.agent_id, checkpoint.thread_id)
    return latest is None or latest.checkpoint_id != checkpoint.checkpoint_id


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _resolution(context: RuntimeContext, proposals: list[Proposal], call_id: str) -> str | None:
    """Tool message content for a paused call, or None while it is still undecided."""
    chain = [proposal for proposal in proposals if proposal.call_id == call_id]
    live = [proposal for proposal in chain if proposal.status is not _S.SUPERSEDED] or chain
    if not live:
        return refusal("proposal_missing", "This call's approval request was never recorded.")
    proposal = live[-1]
    if proposal.status in (_S.PENDING, _S.APPROVED, _S.EXECUTING, _S.NEEDS_RECONCILIATION):
        return None  # undecided, running, or awaiting a human's reconciliation
    if proposal.status in (_S.EXECUTED, _S.FAILED):
        stored = _stored_result(context, proposal)
        if stored is not None:
            return str(stored)
        found = context.ledger.reconciliation(proposal.proposal_id)
        if found is not None and found.outcome is not None:
            return json_text(_reconciled_body(found, found.outcome))
        return refusal("result_missing", "No stored result.")
    return json_text(_decision_body(proposal))


def _continued_messages(
    context: RuntimeContext, checkpoint: Checkpoint, state: RunState
) -> list[dict[str, Any]] | None:
    """The history with every call of the paused turn answered, or None if one is undecided."""
    if _moved_on(context, checkpoint):
        return None  # the thread already moved on (another process continued it)
    try:
        proposals = [
            proposal
            for proposal in list_proposals(context, None, checkpoint.thread_id)
            if proposal.checkpoint_id == checkpoint.checkpoint_id
        ]
    except LedgerError:
        return None
    messages = [dict(message) for message in checkpoint.messages]
    for call_id in state.call_order:
        content = state.answered.get(call_id) or _resolution(context, proposals, call_id)
        if content is None:
            return None
        messages.append(tool_message(call_id, content))
    state.call_order, state.answered = [], {}
    return messages
