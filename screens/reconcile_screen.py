"""The reconciliation view: calls whose process stopped mid-call, for a human to settle.

Nobody knows whether such a call took effect, so nothing re-runs it. The view lists every
``needs_reconciliation`` proposal and, for the selected one, what ran (tool, canonical
arguments, execution target), where it stopped (executor, pid, host, claimed at, why it was
flagged) and the last trace events of its thread. The operator checks the world and records
the finding: ``e`` "it ran" or ``f`` "it did not take effect", each with a reason; the agent's
thread continues with it when the proposal is resumed. Ledger calls run in thread workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.worker import Worker, WorkerState

from screens.decisions import conflict_message
from screens.literal import escaped, literal
from screens.messages import ReconciliationChanged
from screens.reason_dialog import ReasonDialog
from screens.widgets.reconcile.stopped_call import last_events, what_ran, where_it_stopped
from supervisor.errors import SupervisorError
from supervisor.ledger.errors import ApprovalAlreadyDecided
from supervisor.ledger.models import Proposal, ReconciledOutcome
from supervisor.services.reconciliation import (
    ReconcileChange,
    ReconcileDetail,
    ReconciliationService,
)

#: What each finding means, as the operator reads it.
FINDINGS: dict[ReconciledOutcome, str] = {
    "executed": "it ran (took effect)",
    "failed": "it did not take effect",
}


@dataclass
class ReconcileDetailLoaded(Message):
    """What the selected stopped call ran, where it stopped and its last trace events."""

    detail: ReconcileDetail


@dataclass
class Reconciled(Message):
    """A finding was recorded for ``proposal``."""

    proposal: Proposal
    outcome: ReconciledOutcome


@dataclass
class ReconcileFailed(Message):
    """Recording a finding failed; ``message`` says why (e.g. who reconciled it first)."""

    message: str


def _flagged_at(proposal: Proposal) -> str:
    """When recovery flagged it (the last change of a ``needs_reconciliation`` proposal)."""
    return f"{proposal.updated_at:%H:%M:%S}"


class ReconcileScreen(Screen[None]):
    """List, detail and the two findings of the calls awaiting reconciliation."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("e", "reconcile('executed')", "It ran", id="reconcile.executed"),
        Binding("f", "reconcile('failed')", "It did not take effect", id="reconcile.failed"),
        Binding("escape", "app.pop_screen", "Back", id="reconcile.back"),
    ]

    def __init__(self, *, reconciliation: ReconciliationService) -> None:
        super().__init__()
        self.reconciliation = reconciliation
        self.proposals: dict[str, Proposal] = {}
        self.selected_id: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(
            "Reconcile — calls whose process stopped mid-call (nothing re-runs them)",
            id="title-bar",
            markup=False,
        )
        with Horizontal(id="reconcile-body"):
            yield DataTable(id="reconcile-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="reconcile-detail"):
                yield Static("What ran", classes="pane-title")
                yield Static("", id="reconcile-what", markup=False)
                yield Static("Where it stopped", classes="pane-title")
                yield Static("", id="reconcile-where", markup=False)
                yield Static("Last trace events of its thread", classes="pane-title")
                yield Static("", id="reconcile-trace", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#reconcile-table", DataTable)
        table.add_columns("tool", "agent", "proposal", "flagged (UTC)")
        self.reconciliation.subscribe(self._on_change)
        self.show(self.reconciliation.proposals())
        self.set_focus(table)

    def on_unmount(self) -> None:
        self.reconciliation.unsubscribe(self._on_change)

    def _on_change(self, change: ReconcileChange) -> None:
        self.post_message(ReconciliationChanged(change))

    def on_reconciliation_changed(self, message: ReconciliationChanged) -> None:
        self.show(list(message.change.proposals))

    # -- the list -------------------------------------------------------------------------

    def show(self, proposals: list[Proposal]) -> None:
        """Show ``proposals``, keeping the selection on the same proposal while it is listed."""
        table = self.query_one("#reconcile-table", DataTable)
        keep = self.selected_id
        self.proposals = {proposal.proposal_id: proposal for proposal in proposals}
        table.clear()
        for proposal in proposals:
            table.add_row(
                literal(proposal.tool_name), literal(proposal.owner or "-"),
                literal(proposal.proposal_id[:12]), literal(_flagged_at(proposal)),
                key=proposal.proposal_id,
            )  # fmt: skip
        if not proposals:
            self._select(None)
            return
        ids = list(self.proposals)
        row = ids.index(keep) if keep in self.proposals else 0
        table.move_cursor(row=row)
        self._select(ids[row])

    def on_data_table_row_highlighted(self, message: DataTable.RowHighlighted) -> None:
        key = message.row_key.value if message.row_key is not None else None
        if key in self.proposals and key != self.selected_id:
            self._select(key)

    def _select(self, proposal_id: str | None) -> None:
        self.selected_id = proposal_id
        self.refresh_bindings()
        if proposal_id is None:
            self.query_one("#reconcile-what", Static).update("Nothing needs reconciliation.")
            self.query_one("#reconcile-where", Static).update("")
            self.query_one("#reconcile-trace", Static).update("")
            return
        self.load_detail(proposal_id)

    @work(thread=True, exit_on_error=False, group="reconcile-detail", exclusive=True)
    def load_detail(self, proposal_id: str) -> None:
        self.post_message(ReconcileDetailLoaded(self.reconciliation.detail(proposal_id)))

    def on_reconcile_detail_loaded(self, message: ReconcileDetailLoaded) -> None:
        detail = message.detail
        if detail.proposal.proposal_id != self.selected_id:
            return
        self.query_one("#reconcile-what", Static).update(what_ran(detail))
        self.query_one("#reconcile-where", Static).update(where_it_stopped(detail))
        self.query_one("#reconcile-trace", Static).update(last_events(detail))

    def detail_text(self) -> str:
        """Everything the detail shows now, as plain text (for tests and the tmux e2e)."""
        parts = ("#reconcile-what", "#reconcile-where", "#reconcile-trace")
        rendered = [self.query_one(part, Static).render() for part in parts]
        return "\n".join(part.plain if isinstance(part, Text) else str(part) for part in rendered)

    # -- the findings ---------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "reconcile":
            return True if self.selected_id in self.proposals else None
        return True

    def action_reconcile(self, outcome: ReconciledOutcome) -> None:
        proposal = self.proposals.get(self.selected_id or "")
        if proposal is None:
            return

        def submitted(reason: str | None) -> None:
            if reason:
                self.record(proposal, outcome, reason)

        question = (
            f"{escaped(proposal.tool_name)} ({escaped(proposal.proposal_id[:12])}): "
            f"{FINDINGS[outcome]}. What did you check? (audited; the agent is told)"
        )
        self.app.push_screen(ReasonDialog(question), submitted)

    @work(thread=True, exit_on_error=False, group="reconcile")
    def record(self, proposal: Proposal, outcome: ReconciledOutcome, reason: str) -> None:
        """Record the finding; posts :class:`Reconciled` or :class:`ReconcileFailed`."""
        try:
            self.reconciliation.reconcile(proposal.proposal_id, outcome, reason)
        except ApprovalAlreadyDecided as error:
            self.post_message(ReconcileFailed(conflict_message(error)))
            return
        except SupervisorError as error:
            self.post_message(ReconcileFailed(error.message))
            return
        self.post_message(Reconciled(proposal, outcome))

    def on_reconciled(self, message: Reconciled) -> None:
        self.notify(
            f"{escaped(message.proposal.tool_name)}: {FINDINGS[message.outcome]}. Its thread "
            f"continues with it once resumed (supervisor resume {message.proposal.proposal_id}).",
            title="Reconciled",
        )

    def on_reconcile_failed(self, message: ReconcileFailed) -> None:
        self.notify(message.message, title="Reconcile failed", severity="error")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            text = getattr(error, "message", None) or str(error)
            self.notify(text, title="Ledger error", severity="error")
