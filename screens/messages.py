"""Typed messages posted from service threads and workers to the UI, named in the past tense."""

from __future__ import annotations

from typing import Any

from textual.message import Message

from supervisor.ledger.models import AuditRecord, Blob, Proposal, TraceEvent
from supervisor.services.approvals import InboxChange
from supervisor.services.processes import ProcessRow


class InboxChanged(Message):
    """The approvals service published a change."""

    def __init__(self, change: InboxChange) -> None:
        super().__init__()
        self.change = change


class TraceEventsArrived(Message):
    """New events are in the trace buffer; bursts collapse into one repaint."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TraceEventsArrived)


class ProcessesRefreshed(Message):
    """The processes service produced new rows."""

    def __init__(self, rows: list[ProcessRow]) -> None:
        super().__init__()
        self.rows = rows

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ProcessesRefreshed)


class ProposalDetailLoaded(Message):
    """A proposal's current state, decision history and tool schema were read."""

    def __init__(
        self, proposal: Proposal, history: list[AuditRecord], schema: dict[str, Any] | None
    ) -> None:
        super().__init__()
        self.proposal = proposal
        self.history = history
        self.schema = schema


class BlobLoaded(Message):
    """An offloaded result was read and its integrity checked (``error`` when it failed)."""

    def __init__(self, event: TraceEvent, blob: Blob | None, error: str | None) -> None:
        super().__init__()
        self.event = event
        self.blob = blob
        self.error = error


class ArgumentsRendered(Message):
    """The detail pane drew every line of a proposal's arguments."""

    def __init__(self, proposal: Proposal, lines: list[str]) -> None:
        super().__init__()
        self.proposal = proposal
        self.lines = lines


class ProposalDecided(Message):
    """A decision taken from this supervisor reached the ledger."""

    def __init__(self, action: str, proposals: list[Proposal], detail: str = "") -> None:
        super().__init__()
        self.action = action
        self.proposals = proposals
        self.detail = detail


class DecisionFailed(Message):
    """A decision did not happen; ``message`` says why (e.g. who won and when)."""

    def __init__(self, action: str, message: str) -> None:
        super().__init__()
        self.action = action
        self.message = message
