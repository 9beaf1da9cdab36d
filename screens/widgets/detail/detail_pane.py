"""The detail pane: everything a reviewer needs about one proposal or trace event."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from screens.literal import escaped, literal
from screens.widgets.detail.arguments_view import ArgumentsView
from supervisor.ledger.models import AuditRecord, Blob, Proposal, ProposalWaiter, TraceEvent
from supervisor.services.rendering import short_hash
from supervisor.services.risk import risk_label


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "-"


def _escaped_lines(lines: list[str]) -> str:
    return "\n".join(escaped(line) for line in lines)


def _diff_lines(diff: object) -> list[str]:
    """The ``diff`` of an edit record, one line per change; anything but a list of changes
    (the payload is whatever is in the ledger) is shown as its JSON instead."""
    if not isinstance(diff, list):
        return [f"    diff {json.dumps(diff, ensure_ascii=False, default=str)}"]
    lines = []
    for change in diff:
        if not isinstance(change, dict):
            lines.append(f"    {json.dumps(change, ensure_ascii=False, default=str)}")
            continue
        old = json.dumps(change.get("old"), ensure_ascii=False, default=str)
        new = json.dumps(change.get("new"), ensure_ascii=False, default=str)
        lines.append(f"    {change.get('op')} {change.get('path')}: {old} → {new}")
    return lines


def history_lines(history: list[AuditRecord]) -> list[str]:
    """One entry per audit record of the subject: when, who, what (and why), then its diff.

    Each line is escaped on its own, so a reason or actor with a line break cannot draw a
    line that looks like another record.
    """
    lines: list[str] = []
    for record in history:
        reason = record.payload.get("reason")
        line = f"#{record.seq} {_when(record.at)}  {record.action:<8} by {record.actor}"
        if reason:
            line += f" — {reason}"
        diff = record.payload.get("diff")
        rows = [line, *(_diff_lines(diff) if diff else [])]
        lines.append(_escaped_lines(rows))
    return lines


class DetailPane(Vertical):
    """Header, fields, the full arguments (or payload) and the decision history."""

    def __init__(self, high_risk_domains: Collection[str] = (), *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.high_risk_domains = high_risk_domains
        self.proposal: Proposal | None = None
        self.event: TraceEvent | None = None
        self.full_hash = False
        self.rendered = False
        self.history: list[AuditRecord] = []
        self.waiter: ProposalWaiter | None = None
        self._drawn: dict[str, Text | str] = {}

    def compose(self) -> ComposeResult:
        yield Static("Select a proposal or a trace event.", id="detail-header")
        yield Static("", id="detail-fields")
        yield ArgumentsView(id="detail-arguments")
        yield Static("", id="detail-blob")
        yield Static("", id="detail-history")

    @property
    def arguments(self) -> ArgumentsView:
        return self.query_one(ArgumentsView)

    def show_proposal(self, proposal: Proposal | None) -> None:
        """Show ``proposal``; the arguments view restarts its rendered-rows count."""
        same = (
            proposal is not None
            and self.proposal is not None
            and proposal.proposal_id == self.proposal.proposal_id
        )
        self.proposal, self.event = proposal, None
        if not same:
            self.rendered = False
            self.history = []
            self.waiter = None
            self.arguments.show(proposal)
        self._put("detail-blob", "")
        self._mark_header(proposal=proposal is not None)
        self._refresh_text()

    def show_history(
        self, proposal: Proposal, history: list[AuditRecord], waiter: ProposalWaiter | None = None
    ) -> None:
        """Fill in the decision history (and the waiting process) of the shown proposal."""
        if self.proposal and self.proposal.proposal_id == proposal.proposal_id:
            self.proposal = proposal
            self.history = history
            self.waiter = waiter
            self._refresh_text()

    def mark_rendered(self, proposal_id: str) -> None:
        """Record that the arguments of ``proposal_id`` were drawn in full."""
        if self.proposal and self.proposal.proposal_id == proposal_id:
            self.rendered = True
            self._refresh_text()

    def toggle_full_hash(self) -> None:
        """Show the args hash in full, or shortened again."""
        self.full_hash = not self.full_hash
        self._refresh_text()

    def show_event(self, event: TraceEvent) -> None:
        """Show a trace event: its fields, payload and any offloaded-result pointer."""
        self.proposal, self.event, self.rendered = None, event, False
        self._mark_header(proposal=False)
        self.arguments.show_value(event.payload)
        self._put(
            "detail-header",
            literal(f"{event.kind}  {event.tool or ''}  {event.outcome_status or ''}"),
        )
        fields = [
            f"agent       {event.agent_id or '-'}",
            f"thread      {event.thread_id or '-'}",
            f"run         {event.run_id or '-'}",
            f"at          {_when(event.at)}",
            f"reason code {event.reason_code or '-'}",
        ]
        decided_by = event.payload.get("decided_by")
        if decided_by is not None:  # a rule or grant of the stored policy decided the call
            fields.append(f"decided by  {decided_by}")
        self._put("detail-fields", Text(_escaped_lines(fields)))
        pointer = "" if not event.blob_ref else f"result offloaded: {event.blob_ref}  (o: open)"
        self._put("detail-blob", literal(pointer))
        self._put("detail-history", "")

    def show_blob(self, blob: Blob | None, error: str | None) -> None:
        """Show the offloaded result's pointer: digest, size, type, preview, integrity."""
        if self.event is None:
            return
        if error or blob is None:
            lines = [f"result {self.event.blob_ref}: {error or 'not found in this ledger'}"]
        else:
            lines = [
                f"offloaded result  sha256:{short_hash(blob.sha256)}  {blob.size:,} bytes  "
                f"{blob.media_type}  integrity ok",
                f"preview: {blob.preview[:300]}",
                "(o: open the full result)",
            ]
        self._put("detail-blob", Text(_escaped_lines(lines)))

    def _put(self, static_id: str, content: Text | str) -> None:
        """Show ``content`` in one of the pane's texts, unless it shows that already: an
        update lays the screen out again, and the pane is refreshed by every step of loading a
        proposal (its row, its history, its arguments drawn)."""
        if self._drawn.get(static_id) != content:
            self._drawn[static_id] = content
            self.query_one(f"#{static_id}", Static).update(content)

    def _mark_header(self, *, proposal: bool, rendered: bool = False) -> None:
        """Colour the header by what is shown (a proposal, its arguments all drawn). The
        classes go on the header, the one node they style: a class changed on the pane would
        restyle every node in it, and under a busy inbox the selection changes often."""
        header = self.query_one("#detail-header", Static)
        header.set_class(proposal, "-proposal")
        header.set_class(rendered, "-rendered")

    def _refresh_text(self) -> None:
        proposal = self.proposal
        if proposal is None:
            self._put("detail-header", "Select a proposal or a trace event.")
            self._put("detail-fields", "")
            self._put("detail-history", "")
            return
        args_hash = proposal.args_hash if self.full_hash else short_hash(proposal.args_hash)
        seen, total = self.arguments.rows_seen
        shown = "all arguments shown" if self.rendered else f"shown {seen}/{total} rows — scroll"
        self._put("detail-header", literal(f"{proposal.tool_name}  [{proposal.status.value}]"))
        rows = [
            f"id          {proposal.proposal_id}",
            f"args hash   {args_hash}{'' if self.full_hash else '…  (h: full)'}",
            f"policy      {proposal.policy_reason or '-'}",
            f"owner       {proposal.owner or '-'}   user {proposal.user or '-'}",
            f"runtime     {proposal.runtime}"
            + (f"   turn {proposal.turn_id}" if proposal.turn_id else ""),
            f"thread      {proposal.thread_id or '-'}",
            f"checkpoint  {proposal.checkpoint_id or '-'}",
            f"domains     {', '.join(proposal.domains) or '-'}   "
            f"risk {risk_label(proposal, self.high_risk_domains)}",
            f"target      {json.dumps(proposal.execution_target, ensure_ascii=False)}",
            f"created     {_when(proposal.created_at)}",
            f"expires     {_when(proposal.expires_at)}",
        ]
        if proposal.supersedes_id:
            rows.append(f"supersedes  {proposal.supersedes_id}")
        if proposal.superseded_by_id:
            rows.append(f"superseded by {proposal.superseded_by_id}")
        if proposal.decided_by_rule is not None:  # the stored policy decided, not a person
            rows.append(f"decided     by {proposal.decided_by} at {_when(proposal.decided_at)}")
        elif proposal.approver_id:
            rows.append(f"decided     by {proposal.approver_id} at {_when(proposal.decided_at)}")
        if proposal.quorum is not None:
            voters = ", ".join(vote.identity for vote in proposal.approvals) or "none yet"
            rows.append(f"quorum      {proposal.quorum} ({voters})")
        if self.waiter is not None:
            orphaned = self.waiter.orphans(proposal)
            rows.append(f"{'ORPHANED   ' if orphaned else 'waiter     '} {self.waiter.describe()}")
        rows.append(f"review      {shown}")
        self._put("detail-fields", Text(_escaped_lines(rows)))
        self._mark_header(proposal=True, rendered=self.rendered)
        lines = history_lines(self.history)
        self._put(
            "detail-history", Text("history\n" + ("\n".join(lines) if lines else "(loading)"))
        )
