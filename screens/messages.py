"""Typed messages posted from service threads and workers to the UI, named in the past tense."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from screens.decisions import Decision
from supervisor.ledger.models import AuditRecord, Blob, Proposal, ProposalWaiter, TraceEvent
from supervisor.services.approvals import InboxChange
from supervisor.services.connection import ConnectionStatus
from supervisor.services.process_control import StartedRun
from supervisor.services.processes import ProcessRow
from supervisor.services.reconciliation import ReconcileChange
from supervisor.services.webhooks import AttemptReport


@dataclass
class InboxChanged(Message):
    """The approvals service published a change."""

    change: InboxChange


@dataclass
class WebhookAttempted(Message):
    """The webhook dispatcher attempted one delivery (in its own thread)."""

    report: AttemptReport


@dataclass
class TraceEventsArrived(Message):
    """New events are in the trace buffer; bursts collapse into one repaint."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TraceEventsArrived)


@dataclass
class ProcessesRefreshed(Message):
    """The processes service produced new rows."""

    rows: list[ProcessRow]

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ProcessesRefreshed)


@dataclass
class ProposalDetailLoaded(Message):
    """A proposal's current state, decision history, tool schema and waiting process were read."""

    proposal: Proposal
    history: list[AuditRecord]
    schema: dict[str, Any] | None
    waiter: ProposalWaiter | None = None


@dataclass
class BlobLoaded(Message):
    """An offloaded result was read and its integrity checked (``error`` when it failed)."""

    event: TraceEvent
    blob: Blob | None
    error: str | None


@dataclass
class ArgumentsRendered(Message):
    """The detail pane drew every line of a proposal's arguments."""

    proposal: Proposal
    lines: list[str]


@dataclass
class ProposalDecided(Message):
    """A decision taken from this supervisor reached the ledger."""

    decision: Decision
    proposals: list[Proposal]
    detail: str = ""


@dataclass
class DecisionFailed(Message):
    """A decision did not happen; ``message`` says why (e.g. who won and when)."""

    decision: Decision
    message: str


@dataclass
class LedgerConnectionChanged(Message):
    """The ledger became unreachable, or reachable again."""

    status: ConnectionStatus


@dataclass
class ResumeStarted(Message):
    """``supervisor resume`` was spawned on an approved orphan."""

    proposal_id: str
    run: StartedRun


@dataclass
class ReconciliationChanged(Message):
    """The calls awaiting reconciliation changed (recovery flagged one, or one was reconciled)."""

    change: ReconcileChange

    def can_replace(self, message: Message) -> bool:
        # A burst keeps the newest list, and the flagged executions of every change it merges.
        if isinstance(message, ReconciliationChanged):
            flagged = (*message.change.flagged, *self.change.flagged)
            self.change = ReconcileChange(self.change.proposals, flagged)
            return True
        return False
