"""The tool-call loop: ask the model, run or propose each call, pause or go on.

One model turn may hold several tool calls. Their ids are made unique first and calls over the
per-turn cap collapse into one refusal (:mod:`supervisor.runtime.intake`). The ledger's stored
policy is asked about every call (:mod:`supervisor.runtime.ruled`): calls it allows that need
no approval run; calls a rule or grant decides are recorded and run or denied at once; every
other call becomes its own proposal keyed by its call id (never by position); the run pauses
once with every pending proposal, and the history keeps the model's order. Every call that is
refused unrun records an ``error`` outcome with its code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.canonical import canonical_hash
from supervisor.ledger.models import Proposal, TraceEvent
from supervisor.outcomes import OutcomeRecord
from supervisor.runtime.calls import Refusal, deliver, resolve_call, tool_payload
from supervisor.runtime.context import RuntimeContext
from supervisor.runtime.errors import ModelUnavailable
from supervisor.runtime.intake import OVER_CAP_ANSWER, over_cap_message, unique_call_ids
from supervisor.runtime.llm import AssistantTurn, ModelToolCall, tool_message
from supervisor.runtime.results import RunResult, RunStatus, refusal, run_result
from supervisor.runtime.ruled import decide_now, policy_outcome, propose_call
from supervisor.runtime.state import PendingCall, RunState, save_checkpoint
from supervisor.runtime.trace import RunTracer
from supervisor.tools.dispatch import ToolCallResult, error_result
from supervisor.tools.errors import ToolCallError

if TYPE_CHECKING:
    from supervisor.tools.contract import Tool

    AnyTool = Tool


class TurnEngine:
    """Runs model turns for one agent until the run completes, pauses, fails or hits a limit."""

    def __init__(self, context: RuntimeContext) -> None:
        self.context = context

    def _save(
        self, tracer: RunTracer, messages: list[dict[str, Any]], state: RunState,
        pending: list[dict[str, Any]] | None = None, checkpoint_id: str | None = None,
    ) -> None:  # fmt: skip
        """The checkpoint and every trace event buffered so far, in one transaction."""
        save_checkpoint(
            self.context.ledger, self.context.agent_id, tracer.thread_id, messages,
            pending or [], state, checkpoint_id=checkpoint_id, trace=tracer.take(),
        )  # fmt: skip

    def run_loop(
        self, messages: list[dict[str, Any]], state: RunState, tracer: RunTracer
    ) -> RunResult:
        """Go on from ``messages`` (whose last message awaits a model reply)."""
        context = self.context
        policy = context.policy
        while True:
            if state.turns >= policy.max_model_turns:
                return self._stop(messages, state, tracer, "limit_reached", "max_model_turns")
            tools = tool_payload(context, messages, state, tracer)
            try:
                turn = context.model.complete(messages, tools)
            except ModelUnavailable as exc:
                tracer.event("model_call", outcome_status="provider_error", reason_code=exc.code)
                return self._stop(messages, state, tracer, "failed", exc.code, exc.to_dict())
            state.turns += 1
            for key, value in turn.usage.items():
                state.usage[key] = state.usage.get(key, 0) + value
            turn, renamed = unique_call_ids(turn)
            cap = policy.max_tool_calls_per_turn
            tracer.event(
                "model_call",
                tool_calls=[call.name for call in turn.tool_calls[:cap]],
                tool_call_count=len(turn.tool_calls),
                rekeyed_call_ids=len(renamed),
                usage=turn.usage,
            )
            messages.append(turn.as_message())
            if not turn.tool_calls:
                state.status = "completed"
                tracer.event("run", outcome_status="completed", turns=state.turns)
                self._save(tracer, messages, state)
                return run_result("completed", tracer, state, output=turn.content)
            pending = self.process_calls(turn, state, tracer, renamed)
            if pending:
                return self._pause(messages, state, tracer, pending)
            messages.extend(
                tool_message(call_id, state.answered[call_id]) for call_id in state.call_order
            )
            state.call_order, state.answered = [], {}
            tracer.flush()

    def _stop(
        self,
        messages: list[dict[str, Any]],
        state: RunState,
        tracer: RunTracer,
        status: RunStatus,
        code: str,
        detail: dict[str, Any] | None = None,
    ) -> RunResult:
        state.status = status
        tracer.event("run", outcome_status=status, reason_code=code)
        self._save(tracer, messages, state)
        error = detail or {"code": code, "message": f"The run stopped: {code}."}
        return run_result(status, tracer, state, error=error)

    def _pause(
        self,
        messages: list[dict[str, Any]],
        state: RunState,
        tracer: RunTracer,
        pending: list[tuple[PendingCall, AnyTool, dict[str, Any]]],
    ) -> RunResult:
        context = self.context
        state.status = "awaiting_approval"
        # The checkpoint commits with the first proposal, the events with the first and the
        # last: one commit for a pause of one call (the checkpoint is stored before any
        # proposal that names it can be read, in the same transaction).
        checkpoint = context.ledger.checkpoint_of(
            context.agent_id, tracer.thread_id, messages,
            [call.model_dump() for call, _, _ in pending], state=state.model_dump(mode="json"),
        )  # fmt: skip
        proposals: list[Proposal] = []
        for index, (call, tool, arguments) in enumerate(pending):
            first, last = index == 0, index == len(pending) - 1

            def report(
                proposal: Proposal, call: PendingCall = call, tool: AnyTool = tool,
                first: bool = first, last: bool = last,
            ) -> list[TraceEvent]:  # fmt: skip
                tracer.event(
                    "approval",
                    tool=tool.name,
                    outcome_status="pending",
                    proposal_id=proposal.proposal_id,
                    call_id=call.call_id,
                    args_hash=proposal.args_hash,
                )
                if last:
                    tracer.event("run", outcome_status="awaiting_approval", pending=len(pending))
                return tracer.take() if first or last else []

            proposal = propose_call(
                context, tool, arguments, user=state.user_id, thread_id=tracer.thread_id,
                call_id=call.call_id, checkpoint_id=checkpoint.checkpoint_id, trace=report,
                checkpoint=checkpoint if first else None,
            )  # fmt: skip
            proposals.append(proposal)
        return run_result("awaiting_approval", tracer, state, proposals=proposals)

    def process_calls(
        self, turn: AssistantTurn, state: RunState, tracer: RunTracer, renamed: dict[str, str]
    ) -> list[tuple[PendingCall, AnyTool, dict[str, Any]]]:
        """Answer or propose every call of one model turn, in the model's order.

        ``renamed`` maps re-keyed call ids to the ids the model sent (traced beside them).
        """
        context = self.context
        policy = context.policy
        cap = policy.max_tool_calls_per_turn
        state.call_order = [call.call_id for call in turn.tool_calls]
        state.answered = {}
        pending: list[tuple[PendingCall, AnyTool, dict[str, Any]]] = []
        for call in turn.tool_calls[:cap]:
            if call.call_id in renamed:
                tracer.event(
                    "tool_call", tool=call.name, call_id=call.call_id,
                    model_call_id=renamed[call.call_id],
                )  # fmt: skip
            else:
                tracer.event("tool_call", tool=call.name, call_id=call.call_id)
            resolved = resolve_call(context, call, state)
            if isinstance(resolved, Refusal):
                self._answer_refusal(state, tracer, call, resolved)
                continue
            if isinstance(resolved, str):
                state.answered[call.call_id] = resolved
                continue
            tool, arguments = resolved
            try:
                prepared = tool.prepare(arguments)
            except ToolCallError as error:
                refused = error_result(tool.name, error)
                self._answer_result(state, tracer, call.call_id, tool.name, refused)
                continue
            key = canonical_hash({"tool": tool.name, "arguments": prepared.arguments})
            state.attempts[key] = state.attempts.get(key, 0) + 1
            if state.attempts[key] > policy.max_attempts_per_call:
                self._answer_refusal(state, tracer, call, Refusal(
                    "attempt_limit",
                    f"This exact call was already made {policy.max_attempts_per_call} times "
                    "in this run; change the arguments or answer without it.",
                ))  # fmt: skip
                continue
            outcome = policy_outcome(context, tool, prepared.arguments, state.user_id)
            if outcome.decision.verdict == "allow" and tool.policy.read_only:
                result = tool.execute(prepared)
                self._answer_result(state, tracer, call.call_id, tool.name, result)
                continue
            if outcome.decided_by_rule is None or not decide_now(
                context, tool, prepared, call.call_id, state, tracer
            ):
                pending_call = PendingCall(
                    call_id=call.call_id,
                    tool_name=tool.name,
                    proposal_id="",
                    arguments=arguments,
                    schema_hash=tool.schema_hash,
                )
                pending.append((pending_call, tool, prepared.arguments))
        if len(turn.tool_calls) > cap:
            self._answer_over_cap(state, tracer, turn.tool_calls[cap:], cap)
        return pending

    def _answer_over_cap(
        self, state: RunState, tracer: RunTracer, over: tuple[ModelToolCall, ...], cap: int
    ) -> None:
        """One refusal, one outcome and one trace event for every call over the cap."""
        first = over[0]
        state.answered[first.call_id] = refusal("tool_call_limit", over_cap_message(cap, len(over)))
        state.answered.update((call.call_id, OVER_CAP_ANSWER) for call in over[1:])
        evidence = {"status": "error", "reason_code": "tool_call_limit"}
        state.outcomes.append(
            OutcomeRecord.of(first.name, first.call_id, evidence, refused_calls=len(over))
        )
        tracer.event(
            "tool_result", tool=first.name, outcome_status="error", reason_code="tool_call_limit",
            call_id=first.call_id, last_call_id=over[-1].call_id, refused_calls=len(over),
        )  # fmt: skip

    def _answer_result(
        self, state: RunState, tracer: RunTracer, call_id: str, tool_name: str,
        result: ToolCallResult,
    ) -> None:  # fmt: skip
        delivery = deliver(self.context, tool_name, call_id, result)
        result, blob_ref = delivery.result, delivery.blob_ref
        state.answered[call_id] = delivery.content
        evidence = result.evidence()
        state.outcomes.append(OutcomeRecord.of(tool_name, call_id, evidence))
        detail = result.error.detail if result.error is not None else None
        tracer.event(
            "tool_result",
            tool=tool_name,
            outcome_status=evidence["status"],
            reason_code=evidence["reason_code"],
            blob_ref=blob_ref,
            call_id=call_id,
            outcome=evidence,
            error_detail=detail,
        )

    def _answer_refusal(
        self, state: RunState, tracer: RunTracer, call: ModelToolCall, refused: Refusal
    ) -> None:
        """Answer a call refused unrun; its ``error`` outcome keeps it out of the cache."""
        state.answered[call.call_id] = refused.content
        reason = refused.reason_code or refused.code
        evidence = {"status": "error", "reason_code": reason}
        state.outcomes.append(OutcomeRecord.of(call.name, call.call_id, evidence))
        tracer.event(
            "tool_result", tool=call.name, outcome_status="error", reason_code=reason,
            call_id=call.call_id,
        )  # fmt: skip
