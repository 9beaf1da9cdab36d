"""Calls the ledger's stored policy decides without a person: a rule or grant allows or denies.

For each call the runtime asks the ledger what the policy in force says
(:meth:`~supervisor.ledger.service.ApprovalLedger.decide_call`, one read):

* a tool that needs no approval, allowed (by its default or a rule): it runs as before, with
  nothing recorded;
* a decision by a rule or grant: the call is proposed at once, and the ledger decides it again
  in the transaction that records it (:meth:`~supervisor.ledger.service.ApprovalLedger.propose`);
  an ``approved`` proposal is claimed and run exactly like one a person approved, a
  ``rejected`` one reaches the model as a ``denied`` outcome with the rule's reason;
* everything else is asked: it joins the turn's pending calls and the run pauses.

If the policy changed between the read and the record so that a person must decide after all,
the early proposal is cancelled (with that reason) and the call is asked like any other.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from supervisor.canonical import args_hash
from supervisor.errors import model_error
from supervisor.ledger.decide import RuleOutcome
from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import (
    Checkpoint,
    ExecutorIdentity,
    Proposal,
    ProposalStatus,
    TraceEvent,
)
from supervisor.outcomes import OutcomeRecord
from supervisor.outcomes.blobref import BlobRef
from supervisor.rules.model import CallFacts
from supervisor.runtime.calls import deliver
from supervisor.runtime.context import RuntimeContext
from supervisor.runtime.llm import json_text
from supervisor.runtime.state import RunState
from supervisor.runtime.trace import RunTracer
from supervisor.tools.dispatch import PreparedCall

if TYPE_CHECKING:
    from supervisor.tools.contract import Tool

_S = ProposalStatus
DENIED_BY_RULE = "denied_by_rule"
"""The outcome reason code of a call a policy rule denied."""


def call_facts(
    context: RuntimeContext, tool: Tool, arguments: dict[str, Any], user: str | None
) -> CallFacts:
    """The call as the policy's rules see it."""
    return CallFacts(
        tool=tool.name, arguments=arguments, domains=tool.policy.domains,
        agent=context.agent_id, user=user, target=dict(tool.execution_target or {}),
        read_only=tool.policy.read_only,
    )  # fmt: skip


def policy_outcome(context: RuntimeContext, tool: Tool, arguments: dict[str, Any],
                   user: str | None) -> RuleOutcome:  # fmt: skip
    """What the stored policy says about this call now (nothing is recorded)."""
    return context.ledger.decide_call(
        call_facts(context, tool, arguments, user),
        schema_hash=tool.schema_hash,
        grantable=tool.policy.grantable,
    )


def propose_call(
    context: RuntimeContext, tool: Tool, arguments: dict[str, Any], *, user: str | None,
    thread_id: str, call_id: str, checkpoint_id: str | None,
    trace: Callable[[Proposal], Iterable[TraceEvent]] | None = None,
    checkpoint: Checkpoint | None = None,
) -> Proposal:  # fmt: skip
    """Record the call in the ledger (which lets the stored policy decide it), with the trace
    events ``trace`` makes of the recorded proposal and ``checkpoint`` in the same
    transaction."""
    return context.ledger.propose(
        tool.name,
        tool.schema_hash,
        arguments,
        execution_target=tool.execution_target,
        policy_reason=tool.policy.approval_reason or "",
        owner=context.agent_id,
        user=user,
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        call_id=call_id,
        domains=tool.policy.domains,
        ttl_seconds=context.policy.approval_ttl_seconds,
        read_only=tool.policy.read_only,
        grantable=tool.policy.grantable,
        trace=trace,
        checkpoint=checkpoint,
    )


def denied_content(proposal: Proposal) -> str:
    """What the model is told about a call the policy denied: the code and the rule's reason."""
    return json_text(model_error(
        "denied", f"The policy denied this call ({proposal.decided_by}); it did not run.",
        reason=proposal.decision_reason or "",
    ))  # fmt: skip


def decide_now(
    context: RuntimeContext, tool: Tool, prepared: PreparedCall, call_id: str,
    state: RunState, tracer: RunTracer,
) -> bool:  # fmt: skip
    """Record a call a rule or grant decides and answer it; False when it must be asked after
    all (the early proposal is then cancelled)."""
    proposal = propose_call(
        context, tool, prepared.arguments, user=state.user_id, thread_id=tracer.thread_id,
        call_id=call_id, checkpoint_id=None,
    )  # fmt: skip
    if proposal.status is _S.PENDING:
        with contextlib.suppress(LedgerError):
            context.ledger.cancel(
                proposal.proposal_id, "policy",
                "the policy changed while the call was recorded; it was asked again",
                via="policy",
            )  # fmt: skip
        return False
    tracer.event(
        "approval", tool=tool.name, outcome_status=proposal.status.value,
        reason_code="rule" if (proposal.decided_by_rule or "").startswith("rule:") else "grant",
        proposal_id=proposal.proposal_id, call_id=call_id, decided_by=proposal.decided_by,
        args_hash=proposal.args_hash,
    )  # fmt: skip
    if proposal.status is _S.REJECTED:
        _answer(state, tracer, tool.name, call_id, denied_content(proposal),
                {"status": "denied", "reason_code": DENIED_BY_RULE}, proposal)  # fmt: skip
        return True
    _run_approved(context, tool, prepared, call_id, proposal, state, tracer)
    return True


def _run_approved(
    context: RuntimeContext, tool: Tool, prepared: PreparedCall, call_id: str,
    proposal: Proposal, state: RunState, tracer: RunTracer,
) -> None:  # fmt: skip
    """Claim a proposal the policy approved and run it exactly once, as for a person's."""
    ledger = context.ledger
    expected = args_hash(tool.name, tool.schema_hash, prepared.arguments,
                         tool.execution_target or {})  # fmt: skip
    executor = ExecutorIdentity.current(f"agent:{context.agent_id}")
    try:
        ledger.claim(proposal.proposal_id, expected, executor)
    except LedgerError as exc:  # revoked (or the grant's call refused) before it could run
        content = json_text(model_error(exc.code, "The approval could not be claimed; the "
                                        "call did not run."))  # fmt: skip
        _answer(state, tracer, tool.name, call_id, content,
                {"status": "error", "reason_code": exc.code}, proposal)  # fmt: skip
        return
    delivery = deliver(context, tool.name, call_id, tool.execute(prepared, approved=True))
    result = delivery.result
    stored = ledger.put_blob(delivery.content.encode("utf-8"), "application/json")
    ref = BlobRef(stored.sha256).result_ref
    evidence = result.evidence()
    if result.error is None:
        ledger.complete(proposal.proposal_id, evidence["status"], ref, executor=executor)
    else:
        ledger.fail(proposal.proposal_id, "error", result.error.code, result_ref=ref,
                    executor=executor)  # fmt: skip
    _answer(state, tracer, tool.name, call_id, delivery.content, evidence, proposal,
            blob_ref=delivery.blob_ref)  # fmt: skip


def _answer(
    state: RunState, tracer: RunTracer, tool_name: str, call_id: str, content: str,
    evidence: dict[str, Any], proposal: Proposal, *, blob_ref: str | None = None,
) -> None:  # fmt: skip
    state.answered[call_id] = content
    state.outcomes.append(OutcomeRecord.of(tool_name, call_id, evidence))
    tracer.event(
        "tool_result", tool=tool_name, outcome_status=evidence["status"],
        reason_code=evidence.get("reason_code"), blob_ref=blob_ref, call_id=call_id,
        proposal_id=proposal.proposal_id, decided_by=proposal.decided_by, outcome=evidence,
    )  # fmt: skip
