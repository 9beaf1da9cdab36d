"""Decisions taken from the main screen: approve, reject, cancel, edit, extend, batch approve.

Every action is gated by ``check_action`` (a pending proposal must be selected), asks what it
needs in a dialog, then runs the ledger call in a thread worker that posts
:class:`ProposalDecided` or :class:`DecisionFailed`. Enter never approves.
"""

from __future__ import annotations

from time import monotonic
from typing import Any, assert_never

from textual import events, work
from textual.screen import Screen

from screens.confirm_dialog import ConfirmDialog
from screens.decisions import (
    Approve,
    ApproveSimilar,
    BatchApprove,
    Cancel,
    Decision,
    Edit,
    Extend,
    Reject,
    conflict_message,
    similar_detail,
)
from screens.literal import escaped
from screens.messages import DecisionFailed, ProposalDecided, ResumeStarted
from screens.orphan_dialog import OrphanAnswer, OrphanDialog
from screens.proposal_selection import ProposalSelection
from screens.reason_dialog import ReasonDialog
from screens.widgets.detail.detail_pane import DetailPane
from screens.widgets.inbox.inbox_pane import InboxPane
from supervisor.errors import SupervisorError
from supervisor.ledger.errors import ApprovalAlreadyDecided
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.services.approvals import ApprovalsService
from supervisor.services.grants import GrantsService
from supervisor.services.guard import RenderedGuard
from supervisor.services.process_control import ProcessControl
from supervisor.services.results import ResultsService
from supervisor.services.risk import is_high_risk
from supervisor.services.settings import SupervisorSettings

PROPOSAL_ACTIONS = frozenset(
    {"approve", "approve_and_resume", "reject", "cancel_proposal", "edit", "extend",
     "batch_approve", "approve_similar"}
)  # fmt: skip


_PENDING = ProposalStatus.PENDING


class DecisionActions(Screen[None]):
    """The decision half of the main screen.

    The screen that mixes it in sets :attr:`process_control` (approve and resume spawns
    ``supervisor resume`` through it) and :attr:`grants` (approve and allow similar).
    """

    process_control: ProcessControl
    grants: GrantsService | None = None

    def __init__(
        self,
        *,
        approvals: ApprovalsService,
        results: ResultsService,
        settings: SupervisorSettings,
    ) -> None:
        super().__init__()
        self.approvals = approvals
        self.results = results
        self.settings = settings
        self.selection = ProposalSelection()
        # Monotonic time when the last key reached this screen (Textual stamps each key as it
        # arrives), compared with ``selection.shown_at``.
        self.key_at: float | None = None
        self.schemas: dict[str, dict[str, Any] | None] = {}

    @property
    def selected(self) -> Proposal | None:
        """The selected proposal (see :class:`ProposalSelection`)."""
        return self.selection.proposal

    @property
    def guard(self) -> RenderedGuard | None:
        """The selected proposal's render guard, once its arguments were drawn in full."""
        return self.selection.guard

    @property
    def shown_at(self) -> float | None:
        """When the selected proposal's arguments were first drawn in full (monotonic)."""
        return self.selection.shown_at

    def on_key(self, event: events.Key) -> None:
        """Remember when the key that may trigger a decision arrived (not when it is handled)."""
        self.key_at = event.time

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in PROPOSAL_ACTIONS:
            return True if self.selection.pending else None
        if action == "open_blob":
            return True if self._selected_blob_event() else None
        return True

    def _selected_blob_event(self) -> bool:
        event = self.query_one(DetailPane).event
        return event is not None and bool(event.blob_ref)

    def reveal_arguments(self) -> None:
        """Bring the arguments on screen when a decision was refused for not showing them
        (a screen that can hide the detail pane shows it)."""

    def proposal_at_cursor(self) -> Proposal | None:
        """The proposal a key means right now (a screen with a list cursor says which)."""
        return self.selection.proposal

    def _cursor_ok(self, proposal: Proposal) -> bool:
        """The key means the selected proposal: the cursor is on it too."""
        at_cursor = self.proposal_at_cursor()
        if at_cursor is not None and at_cursor.proposal_id != proposal.proposal_id:
            # The cursor moved and the key came before the selection followed ("Down a"
            # typed fast): the key must not decide the row the operator just left.
            self.notify(
                f"The cursor is on {escaped(at_cursor.tool_name)} now, not on "
                f"{escaped(proposal.tool_name)}. Check it is the one you mean, then press the "
                "key again.",
                title="Selection just changed",
                severity="warning",
            )
            return False
        return True

    def _guard_ok(self, proposal: Proposal) -> bool:
        if not self._cursor_ok(proposal):
            return False
        guard, shown_at = self.selection.guard, self.selection.shown_at
        if guard is None or guard.proposal_id != proposal.proposal_id:
            self.notify(
                "Scroll through all of the arguments in the detail pane before deciding.",
                title="Arguments not fully shown",
                severity="error",
            )
            self.reveal_arguments()
            return False
        settle = self.settings.decision_settle_seconds
        if shown_at is not None and settle > 0:
            pressed = self.key_at if self.key_at is not None else monotonic()
            shown_for = pressed - shown_at
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
        return is_high_risk(proposal, self.settings.high_risk_domains)

    # -- actions --------------------------------------------------------------------------

    def action_approve(self) -> None:
        self._approve(resume=None)

    def action_approve_and_resume(self) -> None:
        self._approve(resume=True)

    def orphan_note(self, proposal: Proposal) -> str | None:
        """``process X, pid N, lost since T`` (who waited on it) for an orphan, else None."""
        waiter = self.approvals.orphans().get(proposal.proposal_id)
        if waiter is None:
            return None
        process = waiter.process
        where = f"process {waiter.process_id}"
        if process is not None:
            where += f", pid {process.pid}, {process.status}"
            since = process.lost_at or process.heartbeat_at
            where += f" since {since:%H:%M:%S} UTC"
        return where

    def _approve(self, *, resume: bool | None) -> None:
        """Approve the selection; ``resume`` None asks first when the proposal is orphaned."""
        proposal = self.selection.proposal
        if proposal is None or not self._guard_ok(proposal):
            return
        guard = self.selection.guard
        note = self.orphan_note(proposal)
        if resume and note is None:
            self.notify(
                "A live process waits on this proposal and runs it once approved; approving.",
                title="Not an orphan",
            )
            resume = False

        def go(answer: OrphanAnswer | None = None) -> None:
            if answer is not None:
                self.decide(Approve(proposal.proposal_id, guard, resume=answer == "resume"))

        def after_risk() -> None:
            if resume is None and note is not None:
                question = (
                    f"{escaped(proposal.tool_name)} was proposed by an agent that is gone "
                    f"({escaped(note)}). Approving alone runs nothing. Approve and resume it "
                    "in a new supervised process?"
                )
                self.app.push_screen(OrphanDialog(question), go)
            else:
                go("resume" if resume else "approve")

        if not self._high_risk(proposal):
            after_risk()
            return

        def confirmed(answer: bool | None) -> None:
            if answer:
                after_risk()

        domains = escaped(", ".join(proposal.domains))
        self.app.push_screen(
            ConfirmDialog(
                f"{escaped(proposal.tool_name)} touches high-risk domains ({domains}). Approve it?",
                "Approve",
            ),
            confirmed,
        )

    def action_batch_approve(self) -> None:
        proposal = self.selection.proposal
        if proposal is None or not self._guard_ok(proposal):
            return
        identical = tuple(p.proposal_id for p in self.approvals.identical_pending(proposal))
        if len(identical) < 2:
            self.notify("No other pending proposal has the same tool and arguments.")
            return
        decision = BatchApprove(proposal.proposal_id, self.selection.guard, identical)

        def confirmed(answer: bool | None) -> None:
            if answer:
                self.decide(decision)

        orphans = self.approvals.orphans()
        gone = sum(1 for proposal_id in identical if proposal_id in orphans)
        warning = ""
        if gone:
            warning = (
                f" {gone} of them are orphaned (their agents are gone): approving runs nothing "
                "for those; resume each with R or `supervisor resume ID`."
            )
        self.app.push_screen(
            ConfirmDialog(
                f"Approve {len(identical)} identical {escaped(proposal.tool_name)} proposals "
                f"(args hash {escaped(proposal.args_hash[:12])})?{warning}",
                f"Approve {len(identical)}",
            ),
            confirmed,
        )

    def action_reject(self) -> None:
        proposal = self.selection.proposal
        if proposal is None or not self._cursor_ok(proposal):
            return

        def submitted(reason: str | None) -> None:
            if reason:
                self.decide(Reject(proposal.proposal_id, reason))

        self.app.push_screen(ReasonDialog(f"Reject {escaped(proposal.tool_name)}: why?"), submitted)

    def action_cancel_proposal(self) -> None:
        proposal = self.selection.proposal
        if proposal is None or not self._cursor_ok(proposal):
            return

        def submitted(reason: str | None) -> None:
            if reason is not None:
                self.decide(Cancel(proposal.proposal_id, reason or None))

        self.app.push_screen(
            ReasonDialog(f"Cancel {escaped(proposal.tool_name)} (reason optional)", required=False),
            submitted,
        )

    def action_edit(self) -> None:
        proposal = self.selection.proposal
        if proposal is None or not self._guard_ok(proposal):
            return
        guard = self.selection.guard

        def saved(arguments: dict[str, Any] | None) -> None:
            if arguments is not None:
                self.decide(Edit(proposal.proposal_id, guard, arguments))

        # Imported on first use: not on the first screen's path.
        from screens.edit_arguments_screen import EditArgumentsScreen

        schema = self.schemas.get(proposal.proposal_id)
        self.app.push_screen(EditArgumentsScreen(proposal, schema), saved)

    def action_extend(self) -> None:
        if self.selection.proposal is not None:
            self.decide(Extend(self.selection.proposal.proposal_id))

    def action_open_blob(self) -> None:
        event = self.query_one(DetailPane).event
        if event is not None and event.blob_ref:
            # Imported on first use: not on the first screen's path.
            from screens.blob_screen import BlobScreen

            self.app.push_screen(BlobScreen(event, results=self.results))

    # -- the worker -----------------------------------------------------------------------

    @work(thread=True, exit_on_error=False, group="decide")
    def decide(self, decision: Decision) -> None:
        """Record ``decision`` in the ledger; posts :class:`ProposalDecided` or
        :class:`DecisionFailed`."""
        service = self.approvals
        try:
            match decision:
                case Approve():
                    if decision.resume:  # nothing is decided when the agent cannot come back
                        self.process_control.check_resume(decision.proposal_id)
                    decided = [service.approve(decision.proposal_id, decision.guard)]
                    self.post_message(ProposalDecided(decision, decided))
                    # A quorum vote that leaves it pending has nothing to resume yet.
                    if decision.resume and decided[0].status is ProposalStatus.APPROVED:
                        self.start_resume(decision)
                case ApproveSimilar():
                    assert self.grants is not None, "the grant key is shown only with grants"
                    similar = self.grants.approve_similar(decision.request, decision.guard)
                    self.post_message(
                        ProposalDecided(
                            decision, [similar.proposal, *similar.approved], similar_detail(similar)
                        )
                    )
                case BatchApprove():
                    batch = service.approve_batch(list(decision.ids), decision.guard)
                    lost = "; ".join(
                        conflict_message(e) if isinstance(e, ApprovalAlreadyDecided) else e.message
                        for e in batch.failed
                    )
                    self.post_message(ProposalDecided(decision, list(batch.approved), lost))
                case Reject():
                    decided = [service.reject(decision.proposal_id, decision.reason)]
                    self.post_message(ProposalDecided(decision, decided))
                case Cancel():
                    decided = [service.cancel(decision.proposal_id, decision.reason)]
                    self.post_message(ProposalDecided(decision, decided))
                case Extend():
                    decided = [service.extend(decision.proposal_id)]
                    self.post_message(ProposalDecided(decision, decided))
                case Edit():
                    from screens.edit_arguments_screen import diff_text

                    result = service.edit(decision.proposal_id, decision.arguments, decision.guard)
                    self.post_message(
                        ProposalDecided(decision, [result.new], diff_text(result.diff))
                    )
                case _:
                    assert_never(decision)
        except ApprovalAlreadyDecided as error:
            self.post_message(DecisionFailed(decision, conflict_message(error)))
        except SupervisorError as error:
            text = f"{error.message} {error.hint}" if error.hint else error.message
            if isinstance(decision, Approve) and decision.resume:
                text = f"Nothing was approved: {text}"
            self.post_message(DecisionFailed(decision, escaped(text)))

    def start_resume(self, decision: Approve) -> None:
        """Spawn ``supervisor resume`` on an approved orphan (from the decision worker)."""
        try:
            started = self.process_control.start_resume(decision.proposal_id)
        except (SupervisorError, OSError) as error:
            message = getattr(error, "message", str(error))
            self.post_message(
                DecisionFailed(
                    decision,
                    f"Approved, but the resume did not start: {escaped(message)} Run "
                    f"`supervisor resume {decision.proposal_id}`.",
                )
            )
            return
        self.post_message(ResumeStarted(decision.proposal_id, started))

    def on_resume_started(self, message: ResumeStarted) -> None:
        run = message.run
        self.notify(
            f"{escaped(message.proposal_id[:12])} resumes in {escaped(run.process_id)} "
            f"(pid {run.pid}); follow it in the processes pane (l: log, k: stop).",
            title="Resuming an orphan",
        )

    #: The proposal an edit just created: the inbox cursor moves to it once its row is shown,
    #: so the selection stays on the call being decided (not on whatever row took its place).
    follow_edit: str | None = None

    def on_proposal_decided(self, message: ProposalDecided) -> None:
        voted = message.proposals[0] if message.proposals else None
        if isinstance(message.decision, Approve) and voted and voted.status is _PENDING:
            self.notify(
                f"{voted.quorum or 'Your approval'} recorded for {escaped(voted.tool_name)}; "
                "another approver must approve before it runs.",
                title="Quorum vote recorded",
            )
            return
        if isinstance(message.decision, Edit) and message.proposals:
            self.follow_edit = message.proposals[0].proposal_id
            self.move_to_followed()
        names = ", ".join(escaped(p.tool_name) for p in message.proposals[:3]) or "nothing"
        count = f" ({len(message.proposals)})" if len(message.proposals) > 1 else ""
        text = f"{message.decision.done}: {names}{count}"
        if message.detail:
            text += f"\n{message.detail}"
        self.notify(text, title="Decision recorded")

    def move_to_followed(self) -> None:
        """Move the inbox cursor to :attr:`follow_edit` if its row is shown (then forget it)."""
        if self.follow_edit is not None and self.query_one(InboxPane).move_to(self.follow_edit):
            self.follow_edit = None

    def on_decision_failed(self, message: DecisionFailed) -> None:
        self.notify(message.message, title=f"{message.decision.name} failed", severity="error")
