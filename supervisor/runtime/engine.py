"""The tool-call loop: ask the model, run or propose each call, pause or go on.

One model turn may hold several tool calls. Calls that need no approval run; each call that
needs approval becomes its own proposal keyed by its call id (never by position); the run
pauses once with every pending proposal, and the history keeps the model's order.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from supervisor.canonical import canonical_hash
from supervisor.runtime.errors import ModelUnavailable
from supervisor.runtime.llm import AssistantTurn, ModelToolCall, json_text, tool_message
from supervisor.runtime.results import RunResult, RunStatus
from supervisor.runtime.state import PendingCall, RunState
from supervisor.runtime.trace import RunTracer
from supervisor.tools.dispatch import ToolCallResult
from supervisor.tools.errors import ToolCallError

if TYPE_CHECKING:
    from supervisor.runtime.agent import MemAgent
    from supervisor.tools.governed import GovernedTool

    AnyTool = GovernedTool[..., Any]

OUTCOME_KEYS = (
    "status",
    "reason_code",
    "provider",
    "fallback_provider",
    "degraded",
    "result_count",
    "latency_ms",
)


def outcome_record(tool_name: str, call_id: str, evidence: dict[str, Any]) -> dict[str, Any]:
    """One entry of ``last_tool_outcomes``: content-free evidence of one call."""
    record: dict[str, Any] = {"tool_name": tool_name, "call_id": call_id}
    record.update({key: evidence.get(key) for key in OUTCOME_KEYS})
    return record


def refusal(code: str, message: str) -> str:
    """Tool message content for a call that did not run."""
    return json_text({"error": {"code": code, "message": message}})


class TurnEngine:
    """Runs model turns for one agent until the run completes, pauses, fails or hits a limit."""

    def __init__(self, agent: MemAgent) -> None:
        self.agent = agent

    def run_loop(
        self, messages: list[dict[str, Any]], state: RunState, tracer: RunTracer
    ) -> RunResult:
        """Go on from ``messages`` (whose last message awaits a model reply)."""
        agent = self.agent
        policy = agent.config.context_policy
        while True:
            if state.turns >= policy.max_model_turns:
                return self._stop(messages, state, tracer, "limit_reached", "max_model_turns")
            tools = agent.tool_payload(messages, state, tracer)
            try:
                turn = agent.model.complete(messages, tools)
            except ModelUnavailable as exc:
                tracer.event("model_call", outcome_status="provider_error", reason_code=exc.code)
                return self._stop(messages, state, tracer, "failed", exc.code, exc.to_dict())
            state.turns += 1
            for key, value in turn.usage.items():
                state.usage[key] = state.usage.get(key, 0) + value
            tracer.event(
                "model_call",
                tool_calls=[call.name for call in turn.tool_calls],
                usage=turn.usage,
            )
            messages.append(turn.as_message())
            if not turn.tool_calls:
                state.status = "completed"
                agent.save_checkpoint(tracer.thread_id, messages, [], state)
                tracer.event("run", outcome_status="completed", turns=state.turns)
                tracer.flush()
                return agent.run_result("completed", tracer, state, output=turn.content)
            pending = self.process_calls(turn, state, tracer)
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
        self.agent.save_checkpoint(tracer.thread_id, messages, [], state)
        tracer.event("run", outcome_status=status, reason_code=code)
        tracer.flush()
        error = detail or {"code": code, "message": f"The run stopped: {code}."}
        return self.agent.run_result(status, tracer, state, error=error)

    def _pause(
        self,
        messages: list[dict[str, Any]],
        state: RunState,
        tracer: RunTracer,
        pending: list[tuple[PendingCall, AnyTool, dict[str, Any]]],
    ) -> RunResult:
        agent = self.agent
        state.status = "awaiting_approval"
        checkpoint_id = uuid.uuid4().hex
        agent.save_checkpoint(
            tracer.thread_id,
            messages,
            [call.model_dump() for call, _, _ in pending],
            state,
            checkpoint_id=checkpoint_id,
        )
        proposals = []
        for call, tool, arguments in pending:
            proposal = agent.ledger.propose(
                tool.name,
                tool.schema_hash,
                arguments,
                execution_target=tool.execution_target,
                policy_reason=tool.policy.approval_reason or "",
                owner=agent.agent_id,
                user=state.user_id,
                thread_id=tracer.thread_id,
                checkpoint_id=checkpoint_id,
                call_id=call.call_id,
                domains=tool.policy.domains,
                ttl_seconds=agent.config.context_policy.approval_ttl_seconds,
            )
            proposals.append(proposal)
            tracer.event(
                "approval",
                tool=tool.name,
                outcome_status="pending",
                proposal_id=proposal.proposal_id,
                call_id=call.call_id,
                args_hash=proposal.args_hash,
            )
        tracer.event("run", outcome_status="awaiting_approval", pending=len(proposals))
        tracer.flush()
        return agent.run_result("awaiting_approval", tracer, state, proposals=proposals)

    def process_calls(
        self, turn: AssistantTurn, state: RunState, tracer: RunTracer
    ) -> list[tuple[PendingCall, AnyTool, dict[str, Any]]]:
        """Answer or propose every call of one model turn, in the model's order."""
        agent = self.agent
        policy = agent.config.context_policy
        state.call_order = [call.call_id for call in turn.tool_calls]
        state.answered = {}
        pending: list[tuple[PendingCall, AnyTool, dict[str, Any]]] = []
        for index, call in enumerate(turn.tool_calls):
            tracer.event("tool_call", tool=call.name, call_id=call.call_id)
            if index >= policy.max_tool_calls_per_turn:
                self._answer_refusal(
                    state, tracer, call, "tool_call_limit",
                    f"At most {policy.max_tool_calls_per_turn} tool calls run per turn.",
                )  # fmt: skip
                continue
            resolved = agent.resolve_call(call, state, tracer)
            if isinstance(resolved, str):
                state.answered[call.call_id] = resolved
                continue
            tool, arguments = resolved
            try:
                prepared = tool.prepare(arguments)
            except ToolCallError as error:
                self._answer_result(state, tracer, call.call_id, tool.name, _refused(tool, error))
                continue
            key = canonical_hash({"tool": tool.name, "arguments": prepared.arguments})
            state.attempts[key] = state.attempts.get(key, 0) + 1
            if state.attempts[key] > policy.max_attempts_per_call:
                self._answer_refusal(
                    state, tracer, call, "attempt_limit",
                    f"This exact call was already made {policy.max_attempts_per_call} times "
                    "in this run; change the arguments or answer without it.",
                )  # fmt: skip
                continue
            if tool.policy.requires_approval:
                pending_call = PendingCall(
                    call_id=call.call_id,
                    tool_name=tool.name,
                    proposal_id="",
                    arguments=arguments if isinstance(arguments, str) else json_text(arguments),
                    schema_hash=tool.schema_hash,
                )
                pending.append((pending_call, tool, prepared.arguments))
                continue
            result = tool.execute(prepared)
            self._answer_result(state, tracer, call.call_id, tool.name, result)
        return pending

    def _answer_result(
        self, state: RunState, tracer: RunTracer, call_id: str, tool_name: str,
        result: ToolCallResult,
    ) -> None:  # fmt: skip
        delivery = self.agent.deliver(tool_name, call_id, result)
        result, blob_ref = delivery.result, delivery.blob_ref
        state.answered[call_id] = delivery.content
        evidence = result.evidence()
        state.outcomes.append(outcome_record(tool_name, call_id, evidence))
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
        self, state: RunState, tracer: RunTracer, call: ModelToolCall, code: str, message: str
    ) -> None:
        state.answered[call.call_id] = refusal(code, message)
        evidence = {"status": "error", "reason_code": code}
        state.outcomes.append(outcome_record(call.name, call.call_id, evidence))
        tracer.event(
            "tool_result", tool=call.name, outcome_status="error", reason_code=code,
            call_id=call.call_id,
        )  # fmt: skip


def _refused(tool: AnyTool, error: ToolCallError) -> ToolCallResult:
    from supervisor.tools.dispatch import error_result

    return error_result(tool.name, error)
