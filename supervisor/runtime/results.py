"""What ``run`` and ``resume_approval`` return, and the records they are built from."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from supervisor.errors import model_error
from supervisor.ledger.models import Proposal
from supervisor.outcomes import OutcomeRecord
from supervisor.runtime.llm import json_text

if TYPE_CHECKING:
    from supervisor.runtime.state import RunState
    from supervisor.runtime.trace import RunTracer

RunStatus = Literal["completed", "awaiting_approval", "failed", "limit_reached"]

#: Outcome statuses of calls that did not run because of a decision (or its absence).
DecisionStatus = Literal[
    "denied", "expired", "cancelled", "superseded", "timeout", "needs_reconciliation"
]


class RunResult(BaseModel):
    """The result of ``agent.run`` (or of a resume that continued the model).

    Attributes:
        status: completed | awaiting_approval | failed | limit_reached.
        output: The model's final text, when completed.
        proposals: Proposals pending a human decision, when awaiting approval.
        outcomes: Content-free outcome evidence of every tool call in this run.
        usage: Token usage summed over the run's model calls.
        error: Code and message when failed or limited.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    status: RunStatus
    agent_id: str
    thread_id: str
    run_id: str
    output: str | None = None
    proposals: list[Proposal] = Field(default_factory=list)
    outcomes: list[OutcomeRecord] = Field(default_factory=list)
    usage: dict[str, int] = Field(default_factory=dict)
    error: dict[str, Any] | None = None


class ApprovalResumeResult(BaseModel):
    """The result of ``agent.resume_approval``.

    Attributes:
        proposal: The proposal as it stands after the resume.
        tool_result: What the model receives for this call (the value, or an honest
            denied/cancelled/expired message).
        consumed: True when this resume executed the approved call; it can never run again.
        outcome: Content-free evidence of the call (a tool outcome or a decision outcome).
        assistant_response: The model's reply when ``continue_model=True`` went on.
        ok: True when the call ran with a usable outcome.
        error_code: Why nothing ran (``approval_pending``, ``already_consumed``, ``denied``...).
        run: The continued run, when ``continue_model=True``.
        turn_holder: Who held the paused turn when this resume left its continuation to
            them (see ``supervisor.runtime.turn_lease``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    proposal: Proposal
    tool_result: Any = None
    consumed: bool = False
    outcome: OutcomeRecord | None = None
    assistant_response: str | None = None
    ok: bool = False
    error_code: str | None = None
    run: RunResult | None = None
    turn_holder: str | None = None


def refusal(code: str, message: str) -> str:
    """Tool message content for a call that did not run."""
    return json_text(model_error(code, message))


def run_result(
    status: RunStatus,
    tracer: RunTracer,
    state: RunState,
    *,
    output: str | None = None,
    proposals: list[Proposal] | None = None,
    error: dict[str, Any] | None = None,
) -> RunResult:
    """Assemble the :class:`RunResult` of the run that ``tracer`` and ``state`` belong to."""
    return RunResult(
        status=status, agent_id=tracer.agent_id, thread_id=tracer.thread_id,
        run_id=state.run_id, output=output, proposals=proposals or [],
        outcomes=list(state.outcomes), usage=dict(state.usage), error=error,
    )  # fmt: skip
