"""The resumable state of a run, stored as JSON in a ledger checkpoint (never pickled)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from supervisor.outcomes import OutcomeRecord
from supervisor.runtime.errors import CheckpointTooNew

if TYPE_CHECKING:
    from supervisor.ledger.models import TraceEvent
    from supervisor.ledger.service import ApprovalLedger

#: Bumped when the checkpoint layout changes; a newer checkpoint is refused, not guessed at.
RUN_STATE_VERSION = 1


class PendingCall(BaseModel):
    """A tool call of the paused turn that waits for a human decision."""

    model_config = ConfigDict(extra="forbid")

    call_id: str
    tool_name: str
    proposal_id: str
    arguments: str
    schema_hash: str


class RunState(BaseModel):
    """Everything besides the message history that a resume needs.

    Attributes:
        run_id: The run this state belongs to.
        user_id: On whose behalf the agent acts.
        call_order: Tool-call ids of the paused turn, in the model's order.
        answered: Tool message content for calls of the paused turn that already have one.
        attempts: How often each identical call (tool + arguments) was made in this run.
        turns: Model round trips so far.
        usage: Token usage so far.
        outcomes: Outcome evidence so far.
        toolbox_state: Router state (e.g. tools revealed last turn).
        status: completed | awaiting_approval | failed | limit_reached.
    """

    model_config = ConfigDict(extra="forbid")

    version: int = RUN_STATE_VERSION
    run_id: str
    user_id: str | None = None
    call_order: list[str] = Field(default_factory=list)
    answered: dict[str, str] = Field(default_factory=dict)
    attempts: dict[str, int] = Field(default_factory=dict)
    turns: int = 0
    usage: dict[str, int] = Field(default_factory=dict)
    outcomes: list[OutcomeRecord] = Field(default_factory=list)
    toolbox_state: dict[str, Any] = Field(default_factory=dict)
    status: str = "completed"


def save_checkpoint(
    ledger: ApprovalLedger,
    agent_id: str,
    thread_id: str,
    messages: list[dict[str, Any]],
    pending: Iterable[dict[str, Any]],
    state: RunState,
    *,
    checkpoint_id: str | None = None,
    trace: Iterable[TraceEvent] = (),
) -> str:
    """Store the run's history, pending calls and state as JSON, with the ``trace`` events that
    led to them in the same transaction; returns the checkpoint id."""
    checkpoint = ledger.save_checkpoint(
        agent_id, thread_id, messages, list(pending),
        state=state.model_dump(mode="json"), checkpoint_id=checkpoint_id, trace=trace,
    )  # fmt: skip
    return checkpoint.checkpoint_id


def load_state(raw: dict[str, Any]) -> RunState:
    """Parse a checkpoint's run state, refusing one from a newer runtime.

    Raises:
        CheckpointTooNew: the state's version is newer than :data:`RUN_STATE_VERSION`.
    """
    version = int(raw.get("version", RUN_STATE_VERSION))
    if version > RUN_STATE_VERSION:
        raise CheckpointTooNew(
            f"The checkpoint was written by a newer runtime (state version {version}, "
            f"this one reads {RUN_STATE_VERSION}).",
            hint="Upgrade agent-supervisor in this process before resuming.",
        )
    return RunState.model_validate(raw)
