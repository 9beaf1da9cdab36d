"""Decisions taken from the main screen: approve, reject, cancel, edit, extend, batch approve.

Every action is gated by ``check_action`` (a pending proposal must be selected), asks what it
needs in a dialog, then runs the ledger call in a thread worker that posts
:class:`ProposalDecided` or :class:`DecisionFailed`. Enter never approves.
"""

from __future__ import annotations

from datetime import datetime
from time import monotonic
from typing import Any

from textual import events, work
from textual.screen import Screen

from screens.confirm_dialog import ConfirmDialog
from screens.edit_arguments_screen import EditArgumentsScreen, diff_text
from screens.literal import escaped
from screens.messages import DecisionFailed, ProposalDecided
from screens.reason_dialog import ReasonDialog
from supervisor.errors import SupervisorError
from supervisor.ledger.errors import ApprovalAlreadyDecided
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.services.approvals import ApprovalsService
from supervisor.services.guard import RenderedGuard
from supervisor.services.settings import SupervisorSettings

PROPOSAL_ACTIONS = frozenset(
    {"approve", "reject", "cancel_proposal", "edit", "extend", "batch_approve"}
)


def conflict_message(error: ApprovalAlreadyDecided) -> str:
    """``Already approved by alice@host at 12:00:03 UTC`` for the loser of a race."""
    when = f"{error.at:%Y-%m-%d %H:%M:%S} UTC" if isinstance(error.at, datetime) else "?"
    return f"Already {escaped(error.status)} by {escaped(error.by or 'the ledger')} at {when}."


class DecisionActions(Screen[None]):
    """The decision half of the main screen."""

    def __init__(self, approvals: ApprovalsService, settings: SupervisorSettings) -> None:
        super().__init__()
        self.approvals = approvals
        self.settings = settings
        self.selected: Proposal | None = None
        self.guard: RenderedGuard | None = None
        # Monotonic times: when the selected proposal's arguments were first drawn in full, and
        # when the last key reached this screen (Textual stamps each key as it arrives).
        self.shown_at: float | None = None
        self.key_at: float | None = None
        self.schemas: dict[str, dict[str, Any] | None] = {}

    def on_key(self, event: events.Key) -> None:
        """Remember when the key that may trigger a decision arrived (not when it is handled)."""
        self.key_at = event.time

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in PROPOSAL_ACTIONS:
            pending = self.selected is not None and self.selected.status is ProposalStatus.PENDING
            return True if pending else None
        if action == "open_blob":
            return True if self._selected_blob_event() else None
        return True

    def _selected_blob_event(self) -> bool:
        from screens.widgets.detail.detail_pane import DetailPane

        event = self.query_one(DetailPane).event
        return event is not None and bool(event.blob_ref)

    def _guard_ok(self, proposal: Proposal) -> bool:
        if self.guard is None or self.guard.proposal_id != proposal.proposal_id:
            self.notify(
                "Scroll through all of the arguments in the detail pane before deciding.",
                title="Arguments not fully shown",
                severity="error",
            )
            return False
        settle = self.settings.decision_settle_seconds
        if self.shown_at is not None and settle > 0:
            pressed = self.key_at if self.key_at is not None else monotonic()
            shown_for = pressed - self.shown_at
            if shown_for < settle:
                when = (
                    "before it was on screen"
                    if shown_for < 0
                    else f"{shown_for:.1f}s after it was shown"
                )
                self.notify(
                    f"The key reached {escaped(proposal.tool_name)} {when}. "
                    "Check it is the one you mean, then press the key again.",
                    title="Selection just changed",
                    severity="warning",
                )
                return False
        return True

    def _high_risk(self, proposal: Proposal) -> bool:
        return any(domain in self.settings.high_risk_domains for domain in proposal.domains)

    # -- actions --------------------------------------------------------------------------

    def action_approve(self) -> None:
        proposal = self.selected
        if proposal is None or not self._guard_ok(proposal):
            return
        guard = self.guard
        if not self._high_risk(proposal):
            self.decide("approve", proposal.proposal_id, guard=guard)
            return

        def confirmed(answer: bool | None) -> None:
            if answer:
                self.decide("approve", proposal.proposal_id, guard=guard)

        domains = escaped(", ".join(proposal.domains))
        self.app.push_screen(
            ConfirmDialog(
                f"{escaped(proposal.tool_name)} touches high-risk domains ({domains}). Approve it?",
                "Approve",
            ),
            confirmed,
        )

    def action_batch_approve(self) -> None:
        proposal = self.selected
        if proposal is None or not self._guard_ok(proposal):
            return
        identical = [p.proposal_id for p in self.approvals.identical_pending(proposal)]
        if len(identical) < 2:
            self.notify("No other pending proposal has the same tool and arguments.")
            return
        guard = self.guard

        def confirmed(answer: bool | None) -> None:
            if answer:
                self.decide("batch_approve", proposal.proposal_id, guard=guard, ids=identical)

        self.app.push_screen(
            ConfirmDialog(
                f"Approve {len(identical)} identical {escaped(proposal.tool_name)} proposals "
                f"(args hash {escaped(proposal.args_hash[:12])})?",
                f"Approve {len(identical)}",
            ),
            confirmed,
        )

    def action_reject(self) -> None:
        proposal = self.selected
        if proposal is None:
            return

        def submitted(reason: str | None) -> None:
            if reason:
                self.decide("reject", proposal.proposal_id, reason=reason)

        self.app.push_screen(ReasonDialog(f"Reject {escaped(proposal.tool_name)}: why?"), submitted)

    def action_cancel_proposal(self) -> None:
        proposal = self.selected
        if proposal is None:
            return

        def submitted(reason: str | None) -> None:
            if reason is not None:
                self.decide("cancel", proposal.proposal_id, reason=reason or None)

        self.app.push_screen(
            ReasonDialog(f"Cancel {escaped(proposal.tool_name)} (reason optional)", required=False),
            submitted,
        )

    def action_edit(self) -> None:
        proposal = self.selected
        if proposal is None or not self._guard_ok(proposal):
            return
        guard = self.guard

        def saved(arguments: dict[str, Any] | None) -> None:
            if arguments is not None:
                self.decide("edit", proposal.proposal_id, guard=guard, arguments=arguments)

        schema = self.schemas.get(proposal.proposal_id)
        self.app.push_screen(EditArgumentsScreen(proposal, schema), saved)

    def action_extend(self) -> None:
        if self.selected is not None:
            self.decide("extend", self.selected.proposal_id)

    def action_open_blob(self) -> None:
        from screens.blob_screen import BlobScreen
        from screens.widgets.detail.detail_pane import DetailPane

        event = self.query_one(DetailPane).event
        if event is not None and event.blob_ref:
            self.app.push_screen(BlobScreen(self.approvals.ledger, event))

    # -- the worker -----------------------------------------------------------------------

    @work(thread=True, exit_on_error=False, group="decide")
    def decide(
        self,
        action: str,
        proposal_id: str,
        *,
        guard: RenderedGuard | None = None,
        reason: str | None = None,
        arguments: dict[str, Any] | None = None,
        ids: list[str] | None = None,
    ) -> None:
        service = self.approvals
        try:
            if action == "approve":
                decided = [service.approve(proposal_id, guard)]
                self.post_message(ProposalDecided(action, decided))
            elif action == "batch_approve":
                batch = service.approve_batch(ids or [proposal_id], guard)
                lost = "; ".join(
                    conflict_message(e) if isinstance(e, ApprovalAlreadyDecided) else e.message
                    for e in batch.failed
                )
                self.post_message(ProposalDecided(action, list(batch.approved), lost))
            elif action == "reject":
                decided = [service.reject(proposal_id, reason or "")]
                self.post_message(ProposalDecided(action, decided))
            elif action == "cancel":
                decided = [service.cancel(proposal_id, reason)]
                self.post_message(ProposalDecided(action, decided))
            elif action == "extend":
                decided = [service.extend(proposal_id)]
                self.post_message(ProposalDecided(action, decided))
            elif action == "edit":
                result = service.edit(proposal_id, arguments or {}, guard)
                self.post_message(ProposalDecided(action, [result.new], diff_text(result.diff)))
            else:  # pragma: no cover - actions are fixed above
                raise ValueError(action)
        except ApprovalAlreadyDecided as error:
            self.post_message(DecisionFailed(action, conflict_message(error)))
        except SupervisorError as error:
            self.post_message(DecisionFailed(action, error.message))

    def on_proposal_decided(self, message: ProposalDecided) -> None:
        verbs = {
            "approve": "Approved",
            "batch_approve": "Approved",
            "reject": "Rejected",
            "cancel": "Cancelled",
            "extend": "Extended",
            "edit": "New proposal",
        }
        names = ", ".join(escaped(p.tool_name) for p in message.proposals[:3]) or "nothing"
        count = f" ({len(message.proposals)})" if len(message.proposals) > 1 else ""
        text = f"{verbs.get(message.action, message.action)}: {names}{count}"
        if message.detail:
            text += f"\n{message.detail}"
        self.notify(text, title="Decision recorded")

    def on_decision_failed(self, message: DecisionFailed) -> None:
        self.notify(message.message, title=f"{message.action} failed", severity="error")
