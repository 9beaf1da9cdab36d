"""The main screen's way into the reconciliation view, and its announcements.

The reconciliation service runs recovery in its own thread; when it flags a call (its executor
died mid-call) or finds some waiting at start, the main screen says so in a toast naming the
key, and the footer shows ``n Reconcile`` while any call awaits a finding.
"""

from __future__ import annotations

from textual.screen import Screen

from screens.literal import escaped
from screens.messages import ReconciliationChanged
from supervisor.services.reconciliation import ReconcileChange, ReconciliationService


class ReconcileActions(Screen[None]):
    """Mixed into the main screen, which sets :attr:`reconciliation` in its constructor."""

    reconciliation: ReconciliationService | None
    #: How many calls await a finding, as of the last change heard.
    reconcile_waiting = 0
    _reconcile_announced = False

    def follow_reconciliation(self) -> None:
        """Subscribe (on mount) and show what the service already knows."""
        if self.reconciliation is None:
            return
        self.reconciliation.subscribe(self._on_reconcile_change)
        if self.reconciliation.loaded:
            self._reconcile_update(ReconcileChange(tuple(self.reconciliation.proposals())))

    def unfollow_reconciliation(self) -> None:
        """Unsubscribe (on unmount)."""
        if self.reconciliation is not None:
            self.reconciliation.unsubscribe(self._on_reconcile_change)

    def _on_reconcile_change(self, change: ReconcileChange) -> None:
        self.post_message(ReconciliationChanged(change))

    def on_reconciliation_changed(self, message: ReconciliationChanged) -> None:
        self._reconcile_update(message.change)

    def _reconcile_update(self, change: ReconcileChange) -> None:
        self.reconcile_waiting = len(change.proposals)
        self.refresh_bindings()
        flagged = {execution.proposal_id for execution in change.flagged}
        stopped = [p for p in change.proposals if p.proposal_id in flagged]
        if stopped:
            first = stopped[0]
            more = f" (+{len(stopped) - 1} more)" if len(stopped) > 1 else ""
            self.notify(
                f"{escaped(first.tool_name)} from {escaped(first.owner or 'an agent')}{more} "
                "stopped mid-call: its process is gone. Nothing re-runs it; press n to check "
                "and record whether it took effect.",
                title="Needs reconciliation",
                severity="warning",
            )
        elif change.proposals and not self._reconcile_announced:
            count = len(change.proposals)
            self.notify(
                f"{count} call{'s' if count > 1 else ''} stopped mid-call and await"
                f"{'' if count > 1 else 's'} a human's finding: press n to reconcile.",
                title="Needs reconciliation",
                severity="warning",
            )
        self._reconcile_announced = self._reconcile_announced or bool(change.proposals)

    def reconcile_available(self) -> bool | None:
        """``check_action`` for the view's key: shown while any call awaits a finding."""
        return self.reconciliation is not None and self.reconcile_waiting > 0

    def action_reconcile_view(self) -> None:
        if self.reconciliation is not None:
            # Imported on first use: not on the first screen's path.
            from screens.reconcile_screen import ReconcileScreen

            self.app.push_screen(ReconcileScreen(reconciliation=self.reconciliation))
