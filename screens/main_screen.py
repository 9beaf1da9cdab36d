"""The main screen: processes, approval inbox, live trace and the detail pane.

The screen is a thin view over the services: it subscribes on mount, turns their callbacks
(which arrive on background threads) into messages, and runs every ledger call in a thread
worker. Decisions live in :class:`~screens.decision_actions.DecisionActions`.
"""

from __future__ import annotations

from datetime import datetime
from time import monotonic
from typing import ClassVar

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import DataTable, Static
from textual.worker import Worker, WorkerState

from screens.console_actions import ConsoleActions
from screens.literal import escaped, literal
from screens.messages import (
    ArgumentsRendered,
    BlobLoaded,
    InboxChanged,
    LedgerConnectionChanged,
    ProcessesRefreshed,
    ProposalDetailLoaded,
    TraceEventsArrived,
    WebhookAttempted,
)
from screens.process_actions import ProcessActions
from screens.reconcile_actions import ReconcileActions
from screens.widgets.detail.detail_pane import DetailPane
from screens.widgets.inbox.inbox_pane import InboxPane
from screens.widgets.key_footer import KeyFooter
from screens.widgets.processes.processes_pane import ProcessesPane, detail_line
from screens.widgets.trace.trace_view import TraceView
from supervisor.errors import SupervisorError
from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import AuditRecord, Proposal, TraceEvent
from supervisor.services.approvals import ApprovalsService, InboxChange
from supervisor.services.connection import ConnectionStatus, LedgerConnection
from supervisor.services.grants import GrantsService
from supervisor.services.guard import RenderGuardMissing
from supervisor.services.notify import BlockedNotices, Notice, Notifier, coalesced
from supervisor.services.process_control import ProcessControl
from supervisor.services.processes import ProcessesService, ProcessRow, trace_filter_for
from supervisor.services.reconciliation import ReconciliationService
from supervisor.services.results import ResultsService
from supervisor.services.settings import SupervisorSettings
from supervisor.services.traces import ALL_EVENTS, TraceBatch, TraceFilter, TracesService
from supervisor.services.webhooks import AttemptReport, WebhookDispatcher

#: The past tense of each decision record's action, for the "decided elsewhere" toast.
DECIDED = {
    "approve": "approved",
    "reject": "rejected",
    "cancel": "cancelled",
    "revoke": "revoked",
    "edit": "edited",
    "expire": "expired",
    "approve_vote": "voted to approve",
}


#: Below this many columns the detail pane and the list panes take turns on the whole width.
NARROW_BELOW = 140


NEW_TOAST_SECONDS = 5.0
"""The least time between two "New proposal" toasts (each stays up as long)."""


class MainScreen(ConsoleActions, ProcessActions, ReconcileActions):
    """Watch and steer: everything a supervisor needs on one screen."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # First, so the footer shows it even where the rest of the keys are cut off.
        Binding("question_mark,f1", "app.help", "Help", id="main-help"),
        Binding("a", "approve", "Approve", id="approve"),
        Binding("R", "approve_and_resume", "Approve+resume", id="approve-and-resume"),
        Binding("r", "reject", "Reject", id="reject"),
        Binding("c", "cancel_proposal", "Cancel", id="cancel"),
        Binding("e", "edit", "Edit", id="edit"),
        Binding("x", "extend", "Extend", id="extend"),
        Binding("b", "batch_approve", "Batch", id="batch-approve"),
        Binding("g", "approve_similar", "Similar", id="approve-similar"),
        Binding("G", "grants_view", "Grants", id="grants-view"),
        # Shown only while a call that stopped mid-call awaits a human's finding.
        Binding("n", "reconcile_view", "Reconcile", id="reconcile-view"),
        Binding("o", "open_blob", "Result", id="open-blob"),
        Binding("h", "toggle_hash", "Hash", id="toggle-hash"),
        # A priority binding runs as the key is read, so text typed right after "/" lands in
        # the filter even when keys arrive faster than the screen handles them (a plain binding
        # runs only once the key has bubbled back up, and "c" would meanwhile open Cancel).
        Binding("slash", "focus_filter", "Filter", id="focus-filter", priority=True),
        Binding("i", "focus_inbox", "Inbox", show=False, id="focus-inbox"),
        Binding("t", "focus_trace", "Trace", show=False, id="focus-trace"),
        Binding("d", "focus_detail", "Detail", show=False, id="focus-detail"),
        Binding("s", "start_run", "Run", id="start-run"),
        Binding("l", "follow_log", "Log", id="follow-log"),
        Binding("k", "stop_process", "Stop", id="stop-process"),
        Binding("p", "focus_processes", "Processes", id="focus-processes"),
        Binding("f", "clear_trace_filter", "All agents", id="clear-trace-filter"),
        Binding("y", "copy", "Copy", id="copy"),
        Binding("colon", "command_mode", "Command", show=False, id="command-mode"),
        Binding("escape", "back_to_lists", "Lists", show=False, id="back-to-lists"),
    ]

    def __init__(
        self,
        *,
        approvals: ApprovalsService,
        traces: TracesService,
        processes: ProcessesService,
        results: ResultsService,
        process_control: ProcessControl,
        settings: SupervisorSettings,
        connection: LedgerConnection | None = None,
        reconciliation: ReconciliationService | None = None,
        grants: GrantsService | None = None,
        notifier: Notifier | None = None,
        webhooks: WebhookDispatcher | None = None,
    ) -> None:
        super().__init__(approvals=approvals, results=results, settings=settings)
        self.notifier = notifier
        self.webhooks = webhooks
        self.notices = BlockedNotices(settings.expiry_warning_seconds)
        self.reconciliation = reconciliation
        self.grants = grants
        self.connection = connection or approvals.connection
        self.traces = traces
        self.processes = processes
        self.process_control = process_control
        self._loaded = False
        self._new_arrivals: list[Proposal] = []  # announced, not yet in a toast
        self._new_toast_at = -NEW_TOAST_SECONDS  # when the last "New proposal" toast went up
        # The detail pane shows a trace event the operator chose: inbox changes leave it there
        # until the operator points at the inbox again (a key, a click or focusing it).
        self.showing_event = False
        self.trace_filter: TraceFilter = ALL_EVENTS

    def compose(self) -> ComposeResult:
        identity = self.approvals.identity.approver_id
        yield Static(literal(f"Agent Supervisor — approver {identity}"), id="title-bar")
        yield Static("", id="ledger-banner", markup=False)
        with Horizontal(id="main-body"):
            with Vertical(id="left-column"):
                yield Static("Agents and processes", classes="pane-title")
                yield ProcessesPane(id="processes")
                yield Static("", id="process-detail", markup=False)
                yield Static("Approval inbox", classes="pane-title", id="inbox-title")
                yield InboxPane(self.settings.high_risk_domains, id="inbox")
                yield Static("Live trace — all agents", classes="pane-title", id="trace-title")
                yield TraceView(id="trace")
            yield DetailPane(self.settings.high_risk_domains, id="detail")
        # Compact: every key of the screen fits on a 160-column terminal.
        yield KeyFooter(compact=True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_trace_filter":
            return True if self.trace_filter is not ALL_EVENTS else None
        if action == "reconcile_view":
            return self.reconcile_available()
        if action == "back_to_lists":  # only where the detail pane hides the lists
            return True if self.has_class("-detail-view") else None
        return super().check_action(action, parameters)

    # -- wiring ---------------------------------------------------------------------------

    def _on_inbox(self, change: InboxChange) -> None:
        self.post_message(InboxChanged(change))

    def _on_trace(self, batch: TraceBatch) -> None:
        self.post_message(TraceEventsArrived())

    def _on_processes(self, rows: list[ProcessRow]) -> None:
        self.post_message(ProcessesRefreshed(rows))

    def _on_connection(self, status: ConnectionStatus) -> None:
        self.post_message(LedgerConnectionChanged(status))

    def _on_webhook(self, report: AttemptReport) -> None:
        self.post_message(WebhookAttempted(report))

    def on_mount(self) -> None:
        self.approvals.subscribe(self._on_inbox)
        self.traces.subscribe(self._on_trace)
        self.processes.subscribe(self._on_processes)
        self.connection.subscribe(self._on_connection)
        if self.webhooks is not None:
            self.webhooks.subscribe(self._on_webhook)
        self.follow_reconciliation()
        self._show_connection(self.connection.status())
        self._loaded = self.approvals.loaded
        self.query_one(InboxPane).now = self.now()
        inbox = self.query_one(InboxPane)
        inbox.orphaned = frozenset(self.approvals.orphans())
        inbox.rebuild(self.approvals.pending())
        self.query_one(TraceView).set_events(self.traces.events())
        self.query_one(ProcessesPane).show_rows(self.processes.rows(), self.now())
        self._show_process_detail(self.query_one(ProcessesPane))
        if self.notifier is None:
            write = getattr(self.app, "write_terminal", None)
            self.notifier = Notifier(self.settings.notify, write)
        # Pending before this console started, whether the inbox has read all of it yet or
        # only its first pages (the rest are marked as they arrive, in on_inbox_changed).
        self.notices.seen(self.approvals.pending())
        self.set_interval(1.0, self._tick)
        self.set_focus(self.query_one("#inbox-table"))

    def on_unmount(self) -> None:
        self.approvals.unsubscribe(self._on_inbox)
        self.traces.unsubscribe(self._on_trace)
        self.processes.unsubscribe(self._on_processes)
        self.connection.unsubscribe(self._on_connection)
        if self.webhooks is not None:
            self.webhooks.unsubscribe(self._on_webhook)
        self.unfollow_reconciliation()

    def now(self) -> datetime:
        return self.settings.now()

    def _toast_arrivals(self) -> None:
        """One "New proposal" toast for what arrived, at most one per ``NEW_TOAST_SECONDS``:
        on a busy team ledger a toast per feed page would stack over the detail pane. What
        arrives meanwhile is held and told in the next one ("+N more"); the bell and desktop
        notices are not held."""
        arrivals = self._new_arrivals
        if not arrivals or monotonic() < self._new_toast_at + NEW_TOAST_SECONDS:
            return
        first = arrivals[0]
        more = f" (+{len(arrivals) - 1} more)" if len(arrivals) > 1 else ""
        self.notify(
            f"{escaped(first.tool_name)} from {escaped(first.owner or 'an agent')}{more}",
            title="New proposal",
            timeout=NEW_TOAST_SECONDS,
        )
        self._new_arrivals = []
        self._new_toast_at = monotonic()

    def _tick(self) -> None:
        now = self.now()
        inbox = self.query_one(InboxPane)
        inbox.tick(now)
        self._toast_arrivals()  # what arrived since the last toast, once its time is up
        notices = self.notices.expiring(list(inbox.proposals.values()), now)
        if not notices:
            return
        for notice in coalesced(notices):  # a burst: one bell and desktop notification
            self._send(notice)
        proposal = inbox.proposals[notices[0].proposal_id]
        left = int((proposal.expires_at - now).total_seconds())
        owner = escaped(proposal.owner or "an agent")
        more = f" (+{len(notices) - 1} more)" if len(notices) > 1 else ""
        self.notify(
            f"{escaped(proposal.tool_name)} from {owner} expires in {left}s{more}",
            title="Expiring soon",
            severity="warning",
        )

    # -- service messages -----------------------------------------------------------------

    def on_inbox_changed(self, message: InboxChanged) -> None:
        change = message.change
        inbox = self.query_one(InboxPane)
        # Taken before the rows change: a decided proposal leaves the inbox and the cursor
        # moves on, but the operator was looking at it and must hear who decided it.
        was_selected = self.selection.proposal
        inbox.apply(change)
        self.move_to_followed()
        # The detail follows in the same frame as the rows, never one paint behind them.
        if not self.showing_event:
            self._select(inbox.highlighted())
        if not self._loaded:
            self.notices.seen(change.upserted)  # pending before this console started
            self._loaded = change.loaded
        else:
            notices = self.notices.blocked(change.upserted, self.now())
            for notice in coalesced(notices):  # a burst rings once
                self._send(notice)
            if notices and self.webhooks is not None:
                self.webhooks.wake()  # its own thread POSTs them; this only signals
            if notices:
                ids = {notice.proposal_id for notice in notices}
                self._new_arrivals.extend(p for p in change.upserted if p.proposal_id in ids)
                self._toast_arrivals()
        if was_selected is not None:
            self._announce_decisions(was_selected, change.decisions)
        for record in change.decisions:
            if self.selection.is_selected(record.subject):
                self.load_detail(record.subject)
        if change.orphaned is not None:  # a waiting process came or went: say so in the detail
            for proposal in change.upserted:
                if self.selection.is_selected(proposal.proposal_id):
                    self.load_detail(proposal.proposal_id)
            if change.orphaned:
                self.prepare_resume()

    def on_webhook_attempted(self, message: WebhookAttempted) -> None:
        """A webhook delivery that failed for good is said once (retries are not)."""
        report = message.report
        if report.state != "failed":
            return
        answer = f"HTTP {report.status}" if report.status is not None else "no answer"
        self.notify(
            f"{escaped(report.webhook_url)}: {answer} after {report.attempt} attempt(s). "
            "`supervisor notify deliveries --failed` lists them.",
            title="Webhook delivery failed",
            severity="warning",
        )

    def _send(self, notice: Notice) -> None:
        if self.notifier is not None:
            self.notifier.send(notice)

    @work(thread=True, exit_on_error=False, group="process-control")
    def prepare_resume(self) -> None:
        """Keep a warm resume process ready while orphans are in the inbox (approve and resume
        then claims the call without paying Python's start-up)."""
        try:
            self.process_control.prepare_resume()
        except (SupervisorError, OSError):
            pass  # approve and resume spawns a process itself and reports what fails

    def _announce_decisions(self, proposal: Proposal, records: tuple[AuditRecord, ...]) -> None:
        """Tell the operator when someone else decided the proposal they had selected."""
        me = self.approvals.identity.approver_id
        for record in records:
            if record.subject != proposal.proposal_id or record.actor == me:
                continue
            done = DECIDED.get(record.action, record.action)
            moved = "" if self.selection.is_selected(record.subject) else " (it left the inbox)"
            self.notify(
                f"{escaped(record.actor)} {done} {escaped(proposal.tool_name)} "
                f"at {record.at:%H:%M:%S} UTC{moved}",
                title="Decided elsewhere",
                severity="warning",
            )

    def on_ledger_connection_changed(self, message: LedgerConnectionChanged) -> None:
        self._show_connection(message.status)
        if message.status.connected and message.status.outage_seconds is not None:
            self.notify(
                f"Reconnected after {message.status.outage_seconds:.1f}s; caught up from the "
                "feed cursor.",
                title="Ledger back",
            )

    def _show_connection(self, status: ConnectionStatus) -> None:
        """The banner under the title: shown while the ledger cannot be reached."""
        banner = self.query_one("#ledger-banner", Static)
        banner.set_class(not status.connected, "-down")
        if status.connected or status.down_since is None:
            banner.update("")
            return
        banner.update(
            literal(
                f"Ledger unreachable since {status.down_since:%H:%M:%S} UTC, reconnecting; "
                f"what is shown may be stale. {status.message}"
            )
        )

    def on_trace_events_arrived(self, message: TraceEventsArrived) -> None:
        self.query_one(TraceView).set_events(self.traces.events())

    def on_processes_refreshed(self, message: ProcessesRefreshed) -> None:
        pane = self.query_one(ProcessesPane)
        pane.show_rows(message.rows, self.now())
        self._show_process_detail(pane)

    def on_processes_pane_process_selected(self, message: ProcessesPane.ProcessSelected) -> None:
        pane = self.query_one(ProcessesPane)
        self._show_process_detail(pane)
        # The operator moving through the pane picks what the trace shows; a refresh does not.
        if message.by_operator and message.row is not None:
            self._filter_trace(trace_filter_for(message.row))

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        row = self.query_one(ProcessesPane).selected_row
        if message.data_table.id == "processes" and row is not None:
            self._filter_trace(trace_filter_for(row))

    def _filter_trace(self, trace_filter: TraceFilter) -> None:
        self.trace_filter = trace_filter
        self.query_one(TraceView).set_filter(trace_filter)
        self.query_one("#trace-title", Static).update(literal(f"Live trace — {trace_filter.label}"))
        self.refresh_bindings()

    def action_clear_trace_filter(self) -> None:
        """Show every agent's events in the trace again."""
        self._filter_trace(ALL_EVENTS)

    def _show_process_detail(self, pane: ProcessesPane) -> None:
        """The selected process's full command, pid, host and state, under the table."""
        self.query_one("#process-detail", Static).update(literal(detail_line(pane.selected_row)))

    # -- selection and detail -------------------------------------------------------------

    def on_inbox_pane_proposal_highlighted(self, message: InboxPane.ProposalHighlighted) -> None:
        if self.showing_event and not message.by_operator:
            return  # the rows changed under the cursor: the event stays in the detail
        self._show_inbox_proposal(message.proposal)

    def _show_inbox_proposal(self, proposal: Proposal | None) -> None:
        """The operator pointed at the inbox: its row under the cursor goes in the detail (a
        trace event shown there gives way; with the inbox empty it stays)."""
        if proposal is not None:
            self.showing_event = False
        self._select(proposal)

    def proposal_at_cursor(self) -> Proposal | None:
        """The proposal a key means: the inbox row under the cursor when the inbox has the
        focus (the selection follows the cursor by message, so right after a cursor move it
        can still be the row before: "Down y" would copy the wrong id), else the selection."""
        inbox = self.query_one(InboxPane)
        if self.focused is inbox.table:
            return inbox.highlighted()
        return self.selection.proposal

    def _select(self, proposal: Proposal | None) -> None:
        """Show ``proposal`` (the inbox row under the cursor) in the detail pane."""
        if not self.selection.select(proposal):
            return
        self.query_one(DetailPane).show_proposal(proposal)
        self.refresh_bindings()
        if proposal is not None:
            self.load_detail(proposal.proposal_id)

    def on_trace_view_event_selected(self, message: TraceView.EventSelected) -> None:
        self.showing_event = True
        self.selection.clear()
        detail = self.query_one(DetailPane)
        detail.show_event(message.event)
        self.refresh_bindings()
        if message.event.blob_ref:
            self.load_blob_pointer(message.event)

    @work(thread=True, exit_on_error=False, group="detail", exclusive=True)
    def load_detail(self, proposal_id: str) -> None:
        proposal = self.approvals.get(proposal_id)
        history = self.approvals.history(proposal_id)
        schema = self.approvals.tool_schema(proposal)
        waiter = self.approvals.waiter(proposal_id)
        self.post_message(ProposalDetailLoaded(proposal, history, schema, waiter))

    def on_proposal_detail_loaded(self, message: ProposalDetailLoaded) -> None:
        self.schemas[message.proposal.proposal_id] = message.schema
        self.query_one(DetailPane).show_history(message.proposal, message.history, message.waiter)
        if self.selection.refresh(message.proposal):
            self.refresh_bindings()

    @work(thread=True, exit_on_error=False, group="blob", exclusive=True)
    def load_blob_pointer(self, event: TraceEvent) -> None:
        try:
            blob = self.results.describe(event.blob_ref or "")
        except LedgerError as error:
            self.post_message(BlobLoaded(event, None, error.message))
            return
        self.post_message(BlobLoaded(event, blob, None))

    def on_blob_loaded(self, message: BlobLoaded) -> None:
        self.query_one(DetailPane).show_blob(message.blob, message.error)

    def on_arguments_rendered(self, message: ArgumentsRendered) -> None:
        if not self.selection.is_selected(message.proposal.proposal_id):
            return
        try:
            guard = self.approvals.confirm_rendered(message.proposal, message.lines)
        except RenderGuardMissing as error:
            self.notify(error.message, severity="error")
            return
        self.selection.rendered(guard, monotonic())
        self.query_one(DetailPane).mark_rendered(message.proposal.proposal_id)
        self.refresh_bindings()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            text = getattr(error, "message", None) or str(error)
            self.notify(text, title="Ledger error", severity="error")

    # -- focus ----------------------------------------------------------------------------
    # ``Screen.set_focus`` moves focus at once; ``Widget.focus()`` would queue the move behind
    # keys already waiting, so in "d PageDown" typed fast the PageDown would still reach the
    # inbox and move its cursor.

    # On a narrow terminal (below NARROW_BELOW columns) the list panes and the detail pane
    # take turns on the whole width: the one holding the focus is shown. ``d`` (or a decision
    # refused because the arguments were not shown) brings the detail, ``i``/``p``/``t``/``/``
    # or escape the lists back.

    @property
    def narrow(self) -> bool:
        """The detail pane and the list panes are shown one at a time."""
        return self.has_class("-narrow")

    def on_resize(self, event: events.Resize) -> None:
        width = event.size.width
        self.set_class(width < NARROW_BELOW, "-narrow")
        title = "Approval inbox" + (
            "  (d: details and arguments, esc: back)" if self.narrow else ""
        )
        self.query_one("#inbox-title", Static).update(title)
        self._show_view(self.focused)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._show_view(self.focused)
        inbox = self.query_one(InboxPane)
        if self.showing_event and self.focused is inbox.table:
            self._show_inbox_proposal(inbox.highlighted())

    def _show_view(self, focused: object) -> None:
        detail = self.query_one(DetailPane)
        in_detail = isinstance(focused, Widget) and (
            focused is detail or detail in focused.ancestors
        )
        self.set_class(self.narrow and in_detail, "-detail-view")

    def _focus(self, widget: Widget) -> None:
        self._show_view(widget)  # shown first: a widget that is not displayed takes no focus
        self.set_focus(widget)

    def reveal_arguments(self) -> None:
        if self.narrow:
            self.action_focus_detail()

    def action_back_to_lists(self) -> None:
        self.action_focus_inbox()

    def action_focus_filter(self) -> None:
        self._focus(self.query_one("#inbox-filter"))

    def action_focus_inbox(self) -> None:
        self._focus(self.query_one("#inbox-table"))

    def action_focus_trace(self) -> None:
        self._focus(self.query_one(TraceView))

    def action_focus_detail(self) -> None:
        self._focus(self.query_one("#detail-arguments"))

    def action_focus_processes(self) -> None:
        self._focus(self.query_one(ProcessesPane))

    def action_toggle_hash(self) -> None:
        self.query_one(DetailPane).toggle_full_hash()
