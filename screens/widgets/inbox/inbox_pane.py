"""The approval inbox: pending proposals with an expiry countdown, filterable."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import datetime

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Static

from screens.literal import literal
from screens.widgets.inbox.inbox_list import COLUMNS, ID_WIDTH, WITH_RUNTIME, InboxList
from supervisor.ledger.models import SDK_RUNTIME, Proposal
from supervisor.services.approvals import InboxChange
from supervisor.services.rendering import visible_escapes
from supervisor.services.risk import risk_label

#: Put before the tool of a proposal whose waiting process is gone (the detail pane says more).
ORPHAN_BADGE = "orphan: "


def quorum_badge(proposal: Proposal) -> str:
    """``1/2 `` before the tool of a proposal that needs several approvers (votes so far)."""
    if proposal.approvals_required <= 1:
        return ""
    return f"{len(proposal.approvals)}/{proposal.approvals_required} "


def format_countdown(expires_at: datetime, now: datetime) -> str:
    """``1h 02m``, ``4m 09s``, ``12s`` or ``expired``."""
    seconds = int((expires_at - now).total_seconds())
    if seconds <= 0:
        return "expired"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


#: ``field:value`` filter terms and the proposal text each one looks in.
FIELD_TERMS: dict[str, Callable[[Proposal], str]] = {
    "tool": lambda proposal: proposal.tool_name,
    "agent": lambda proposal: proposal.owner,
    "runtime": lambda proposal: proposal.runtime,
    "session": lambda proposal: proposal.thread_id or "",
    "thread": lambda proposal: proposal.thread_id or "",
    "domain": lambda proposal: " ".join(proposal.domains),
    "risk": lambda proposal: proposal.risk or "",
}


def matches(proposal: Proposal, query: str) -> bool:
    """Every whitespace-separated term occurs in the tool, agent, runtime, thread, domains or
    risk; a ``field:value`` term (``runtime:claude``, ``session:abc``) only in that field."""
    haystack = " ".join(
        (proposal.tool_name, proposal.owner, proposal.runtime, proposal.thread_id or "")
        + proposal.domains
        + ((proposal.risk,) if proposal.risk else ())
    ).lower()
    for term in query.lower().split():
        field, colon, value = term.partition(":")
        if colon and field in FIELD_TERMS:
            if value not in FIELD_TERMS[field](proposal).lower():
                return False
        elif term not in haystack:
            return False
    return True


def sort_key(proposal: Proposal) -> tuple[datetime, str]:
    """Inbox order: oldest first, ties broken by id (the ledger's page order)."""
    return (proposal.created_at, proposal.proposal_id)


def session_key(proposal: Proposal) -> tuple[str, str, datetime, str]:
    """Grouped order: by runtime and session (thread), oldest first within a session."""
    return (proposal.runtime, proposal.thread_id or "", *sort_key(proposal))


class InboxPane(Vertical):
    """Filter input above a virtual list of pending proposals (row id = proposal id).

    Every pending proposal the screen was told about is kept in memory; the list draws only
    the rows on screen, so pages of a large pending set can be appended as they arrive.
    """

    @dataclass
    class ProposalHighlighted(Message):
        """The cursor is on ``proposal`` (``None`` when the inbox is empty)."""

        proposal: Proposal | None
        #: The operator moved the cursor or pointed at the row (not the rows changing).
        by_operator: bool = False

    def __init__(self, high_risk_domains: Collection[str], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.high_risk_domains = high_risk_domains
        self.proposals: dict[str, Proposal] = {}
        self.query_text = ""
        self.now: datetime | None = None
        self.orphaned: frozenset[str] = frozenset()
        self.grouped = False
        self._cells: dict[str, tuple[str, ...]] = {}

    def compose(self) -> ComposeResult:
        yield Input(
            placeholder="filter: tool, agent, runtime, session, domain (runtime:NAME)",
            id="inbox-filter",
        )
        yield Static("", id="inbox-empty", markup=False)
        yield InboxList(self._row_cells, id="inbox-table")

    @property
    def table(self) -> InboxList:
        return self.query_one("#inbox-table", InboxList)

    def _static_cells(self, proposal: Proposal) -> tuple[str, ...]:
        orphan = ORPHAN_BADGE if proposal.proposal_id in self.orphaned else ""
        return (
            proposal.proposal_id[:ID_WIDTH],
            orphan + quorum_badge(proposal) + visible_escapes(proposal.tool_name),
            visible_escapes(proposal.owner or "-"),
            *((visible_escapes(proposal.runtime),) if self.table.columns is WITH_RUNTIME else ()),
            visible_escapes(proposal.thread_id or "-"),
            visible_escapes(",".join(proposal.domains) or "-"),
            risk_label(proposal, self.high_risk_domains),
        )

    def _row_cells(self, proposal_id: str) -> tuple[str, ...]:
        """The cells of one row, the countdown computed when the row is drawn."""
        proposal = self.proposals.get(proposal_id)
        if proposal is None:
            return ("-",) * len(self.table.columns)
        cells = self._cells.get(proposal_id)
        if cells is None:
            cells = self._cells[proposal_id] = self._static_cells(proposal)
        expires = format_countdown(proposal.expires_at, self.now) if self.now else "-"
        return (*cells, expires)

    def apply(self, change: InboxChange) -> None:
        """Apply an inbox change (a page of the initial load or a change from the feed)."""
        if change.orphaned is not None:
            self.orphaned = change.orphaned
        for proposal_id in change.removed:
            self.proposals.pop(proposal_id, None)
            self._cells.pop(proposal_id, None)
        for proposal in change.upserted:
            self.proposals[proposal.proposal_id] = proposal
            self._cells.pop(proposal.proposal_id, None)
        self._show()

    def set_filter(self, query: str) -> None:
        """Show only proposals matching ``query``."""
        self.query_text = query
        self._show()

    def set_grouped(self, grouped: bool) -> None:
        """Order the rows by runtime and session (``True``) or oldest first (``False``)."""
        self.grouped = grouped
        self._show()

    def rebuild(self, proposals: Iterable[Proposal] | None = None) -> None:
        """Redraw every row (optionally from a new pending set)."""
        if proposals is not None:
            self.proposals = {proposal.proposal_id: proposal for proposal in proposals}
            self._cells.clear()
        self._show()

    def _show(self) -> None:
        # The runtime column is shown while another runtime's calls are pending.
        columns = COLUMNS
        if any(proposal.runtime != SDK_RUNTIME for proposal in self.proposals.values()):
            columns = WITH_RUNTIME
        if columns is not self.table.columns:
            self.table.set_columns(columns)
            self._cells.clear()
        ordered = sorted(self.proposals.values(), key=session_key if self.grouped else sort_key)
        if self.query_text.strip():
            ordered = [proposal for proposal in ordered if matches(proposal, self.query_text)]
        self.table.set_rows([proposal.proposal_id for proposal in ordered])
        self._say_when_nothing_matches(len(ordered))
        self._announce()

    def _say_when_nothing_matches(self, shown: int) -> None:
        """A filter that hides every pending proposal says so (an empty list would read as
        "nothing is waiting")."""
        notice = self.query_one("#inbox-empty", Static)
        if self.query_text.strip() and not shown and self.proposals:
            notice.update(literal(f"No pending proposal matches {self.query_text.strip()!r} "
                                  f"({len(self.proposals)} pending): clear the filter to see "
                                  "them."))  # fmt: skip
            notice.display = True
        else:
            notice.display = False

    def visible_ids(self) -> list[str]:
        """Ids of the rows shown (after the filter), top to bottom."""
        return list(self.table.row_ids)

    def tick(self, now: datetime) -> None:
        """Refresh the countdowns (only the rows on screen are redrawn)."""
        self.now = now
        self.table.refresh()

    def move_to(self, proposal_id: str) -> bool:
        """Put the cursor on ``proposal_id``'s row; ``False`` when it is not shown."""
        if proposal_id not in self.table.row_ids:
            return False
        self.table.move_cursor(self.table.row_ids.index(proposal_id))
        return True

    def highlighted(self) -> Proposal | None:
        """The proposal under the cursor."""
        row_id = self.table.cursor_id
        return self.proposals.get(row_id) if row_id is not None else None

    def _announce(self, *, by_operator: bool = False) -> None:
        self.post_message(self.ProposalHighlighted(self.highlighted(), by_operator))

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "inbox-filter":
            event.stop()
            self.set_filter(event.value)

    def on_inbox_list_cursor_moved(self, event: InboxList.CursorMoved) -> None:
        event.stop()
        self._announce(by_operator=event.by_operator)
