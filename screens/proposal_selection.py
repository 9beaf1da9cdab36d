"""The main screen's selection: the proposal under the inbox cursor and what was seen of it.

One object holds the three facts a decision is checked against, so they change together: the
proposal, the render guard proving every line of its arguments was drawn, and when they were
first drawn in full (the settle delay counts from there). Selecting another proposal, or a trace
event, resets the guard and the time.
"""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.services.guard import RenderedGuard


@dataclass
class ProposalSelection:
    """What the operator has selected; owned and changed by the main screen (UI thread only)."""

    proposal: Proposal | None = None
    guard: RenderedGuard | None = None
    #: Monotonic time when the proposal's arguments were first drawn in full.
    shown_at: float | None = None

    @property
    def pending(self) -> bool:
        """True when a pending proposal is selected (the decision keys apply)."""
        return self.proposal is not None and self.proposal.status is ProposalStatus.PENDING

    def is_selected(self, proposal_id: str) -> bool:
        """True when the proposal ``proposal_id`` is the selected one."""
        return self.proposal is not None and self.proposal.proposal_id == proposal_id

    def select(self, proposal: Proposal | None) -> bool:
        """Select ``proposal``; ``False`` when exactly this state of it (or nothing, for
        ``None``) is already selected: an empty inbox announcing "nothing" again must not
        blank the trace event shown in the detail pane.

        Another proposal (or none) resets the guard and the shown time; a newer state of the
        same proposal keeps them.
        """
        if proposal == self.proposal:  # the same state, or still nothing
            return False
        if proposal is None or not self.is_selected(proposal.proposal_id):
            self.guard = None
            self.shown_at = None
        self.proposal = proposal
        return True

    def clear(self) -> None:
        """Select nothing (a trace event is shown instead)."""
        self.proposal, self.guard, self.shown_at = None, None, None

    def refresh(self, proposal: Proposal) -> bool:
        """Take a newly read state of the selected proposal; ``False`` when it is not selected."""
        if not self.is_selected(proposal.proposal_id):
            return False
        self.proposal = proposal
        return True

    def rendered(self, guard: RenderedGuard, now: float) -> None:
        """Every line of the selected proposal's arguments was drawn (first time: ``now``)."""
        self.guard = guard
        if self.shown_at is None:
            self.shown_at = now
