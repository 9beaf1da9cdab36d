"""The approval inbox: pending proposals with an expiry countdown, filterable."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Input

from supervisor.ledger.models import Proposal
from supervisor.services.approvals import InboxChange
from supervisor.services.rendering import visible_escapes

COLUMNS = ("tool", "agent", "thread", "domain", "risk", "expires")


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


def risk_label(proposal: Proposal, high_risk_domains: Collection[str]) -> str:
    """The proposal's risk label, ``high`` when one of its domains is marked high-risk."""
    if any(domain in high_risk_domains for domain in proposal.domains):
        return "high"
    return proposal.risk or "-"


def matches(proposal: Proposal, query: str) -> bool:
    """Every whitespace-separated term occurs in the tool, agent, thread, domains or risk."""
    haystack = " ".join(
        (proposal.tool_name, proposal.owner, proposal.thread_id or "", *proposal.domains)
        + ((proposal.risk,) if proposal.risk else ())
    ).lower()
    return all(term in haystack for term in query.lower().split())


class InboxPane(Vertical):
    """Filter input above a table of pending proposals (row key = proposal id)."""

    class ProposalHighlighted(Message):
        """The cursor is on ``proposal`` (``None`` when the inbox is empty)."""

        def __init__(self, proposal: Proposal | None) -> None:
            super().__init__()
            self.proposal = proposal

    def __init__(self, high_risk_domains: Collection[str], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.high_risk_domains = high_risk_domains
        self.proposals: dict[str, Proposal] = {}
        self.query_text = ""
        self.now: datetime | None = None

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter: tool, agent, thread, domain", id="inbox-filter")
        table: DataTable[str] = DataTable(id="inbox-table", cursor_type="row", zebra_stripes=True)
        yield table

    @property
    def table(self) -> DataTable[str]:
        return self.query_one("#inbox-table", DataTable)

    def on_mount(self) -> None:
        for column in COLUMNS:
            self.table.add_column(column, key=column)

    def _cells(self, proposal: Proposal) -> tuple[str, ...]:
        expires = format_countdown(proposal.expires_at, self.now) if self.now else "-"
        return (
            visible_escapes(proposal.tool_name),
            visible_escapes(proposal.owner or "-"),
            visible_escapes(proposal.thread_id or "-"),
            visible_escapes(",".join(proposal.domains) or "-"),
            risk_label(proposal, self.high_risk_domains),
            expires,
        )

    def apply(self, change: InboxChange) -> None:
        """Apply an inbox change incrementally."""
        table = self.table
        for proposal_id in change.removed:
            self.proposals.pop(proposal_id, None)
            if proposal_id in table.rows:
                table.remove_row(proposal_id)
        for proposal in change.upserted:
            self.proposals[proposal.proposal_id] = proposal
            visible = matches(proposal, self.query_text)
            if proposal.proposal_id in table.rows:
                if not visible:
                    table.remove_row(proposal.proposal_id)
                    continue
                for column, value in zip(COLUMNS, self._cells(proposal), strict=True):
                    table.update_cell(proposal.proposal_id, column, value)
            elif visible:
                table.add_row(*self._cells(proposal), key=proposal.proposal_id)
        self._announce()

    def set_filter(self, query: str) -> None:
        """Show only proposals matching ``query``."""
        self.query_text = query
        self.rebuild()

    def rebuild(self, proposals: Iterable[Proposal] | None = None) -> None:
        """Redraw every row (optionally from a new pending set)."""
        if proposals is not None:
            self.proposals = {proposal.proposal_id: proposal for proposal in proposals}
        table = self.table
        table.clear()
        ordered = sorted(self.proposals.values(), key=lambda p: (p.created_at, p.proposal_id))
        for proposal in ordered:
            if matches(proposal, self.query_text):
                table.add_row(*self._cells(proposal), key=proposal.proposal_id)
        self._announce()

    def visible_ids(self) -> list[str]:
        """Ids of the rows shown, top to bottom."""
        return [str(row.key.value) for row in self.table.ordered_rows]

    def tick(self, now: datetime) -> None:
        """Refresh the countdowns of the rows on screen."""
        self.now = now
        table = self.table
        first = int(table.scroll_y)
        for row in table.ordered_rows[first : first + table.size.height + 1]:
            proposal = self.proposals.get(str(row.key.value))
            if proposal is not None:
                expires = format_countdown(proposal.expires_at, now)
                table.update_cell(proposal.proposal_id, "expires", expires)

    def highlighted(self) -> Proposal | None:
        """The proposal under the cursor."""
        table = self.table
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.proposals.get(str(key))

    def _announce(self) -> None:
        self.post_message(self.ProposalHighlighted(self.highlighted()))

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "inbox-filter":
            event.stop()
            self.set_filter(event.value)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._announce()
