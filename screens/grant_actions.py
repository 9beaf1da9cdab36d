"""Grants from the main screen: approve and allow similar (``g``) and the grants view (``G``).

``g`` on a pending proposal whose arguments were drawn in full opens the grant dialog; a
never-grantable tool or a quorum proposal is refused with the typed error's message before
anything opens. The decision itself runs in the decision worker (:class:`ApproveSimilar`).
"""

from __future__ import annotations

from screens.confirm_dialog import ConfirmDialog
from screens.decision_actions import DecisionActions
from screens.decisions import ApproveSimilar
from screens.literal import escaped
from supervisor.services.grants import GrantRequest, grant_refusal


class GrantActions(DecisionActions):
    """The decision half of the main screen, with grants (:attr:`grants` set by the screen)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("approve_similar", "grants_view") and self.grants is None:
            return False
        return super().check_action(action, parameters)

    def action_approve_similar(self) -> None:
        proposal = self.selection.proposal
        if proposal is None or self.grants is None:
            return
        refusal = grant_refusal(proposal)
        if refusal is not None:
            text = f"{refusal.message} {refusal.hint}" if refusal.hint else refusal.message
            self.notify(escaped(text), title="No grant made", severity="error")
            return
        if not self._guard_ok(proposal):
            return
        guard = self.selection.guard

        def chosen(request: GrantRequest | None) -> None:
            if request is None:
                return
            decision = ApproveSimilar(proposal.proposal_id, guard, request)
            if not self._high_risk(proposal):
                self.decide(decision)
                return

            def confirmed(answer: bool | None) -> None:
                if answer:
                    self.decide(decision)

            domains = escaped(", ".join(proposal.domains))
            minutes = request.seconds / 60
            self.app.push_screen(
                ConfirmDialog(
                    f"{escaped(proposal.tool_name)} touches high-risk domains ({domains}). "
                    f"Approve it and allow up to {request.max_uses} similar calls for "
                    f"{minutes:g} min?",
                    "Approve and grant",
                ),
                confirmed,
            )

        # Imported on first use: not on the first screen's path.
        from screens.grant_dialog import GrantDialog

        self.app.push_screen(GrantDialog(proposal, self.approvals.pending), chosen)

    def action_grants_view(self) -> None:
        if self.grants is not None:
            # Imported on first use: not on the first screen's path.
            from screens.grants_screen import GrantsScreen

            self.app.push_screen(GrantsScreen(grants=self.grants, settings=self.settings))
