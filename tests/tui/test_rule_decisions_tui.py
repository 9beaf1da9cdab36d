"""Pilot tests, real SQLite ledger: what the stored policy decided is visible in the TUI.

The detail pane names the rule or grant and the policy version; a quorum proposal is marked
in the inbox (``1/2``), its detail lists who approved, an approval that leaves it pending says
another approver must approve, and a repeated vote shows the ledger's refusal. A trace event
of a policy decision shows ``decided_by`` (escaped) in the trace line and the detail.
"""

from __future__ import annotations

from datetime import UTC, datetime

from textual.widgets import Static
from tui_helpers import (
    drawn_text,
    expect_drawn,
    main_screen,
    propose,
    record_notifications,
    wait_for,
)

from screens.app import make_app
from screens.widgets.detail.detail_pane import DetailPane
from screens.widgets.inbox.inbox_pane import InboxPane
from screens.widgets.trace.trace_view import TraceView
from supervisor.ledger.models import ProposalStatus, TraceEvent
from supervisor.ledger.policy import ApprovalPolicy
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (160, 50)
POLICY = """
[[rules]]
name = "small refunds"
verdict = "allow"
reason = "Refunds under 100 are routine"
tool = "refund"
when = "args.amount < 100"

[[rules]]
name = "two sign"
verdict = "ask"
approvals = 2
reason = "Refunds of 1000 or more need two people"
tool = "refund"
when = "args.amount >= 1000"
"""


def _apply(provider: SQLModelProvider) -> None:
    provider.ledger.apply_policy(ApprovalPolicy.from_toml(POLICY, source="test"), reason="t")


async def test_quorum_proposals_are_marked_and_a_short_vote_says_another_approver_must(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    _apply(provider)
    big = propose(provider.ledger, "refund", arguments={"order": "B-1", "amount": 5000})
    assert big.approvals_required == 2
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        inbox = screen.query_one(InboxPane)
        await wait_for(pilot, lambda: screen.guard is not None)
        await expect_drawn(pilot, inbox.table, ["0/2 refund"])
        fields = screen.query_one("#detail-fields", Static)
        await expect_drawn(pilot, fields, ["quorum      0 of 2 approvals (none yet)"])
        await pilot.press("a")
        await wait_for(
            pilot,
            lambda: any(
                "1 of 2 approvals recorded for refund; another approver must approve" in note
                for note in notes
            ),
        )
        current = provider.ledger.get(big.proposal_id)
        assert current.status is ProposalStatus.PENDING and len(current.approvals) == 1
        (vote,) = current.approvals
        await expect_drawn(pilot, inbox.table, ["1/2 refund"])
        await expect_drawn(pilot, fields, [f"quorum      1 of 2 approvals ({vote.identity})"])
        await pilot.press("a")
        await wait_for(pilot, lambda: any("already approved proposal" in note for note in notes))
        assert "a quorum needs distinct approvers" in notes[-1]
    assert len(provider.ledger.get(big.proposal_id).approvals) == 1


async def test_the_detail_and_the_trace_name_the_rule_or_grant_that_decided(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    _apply(provider)
    small = propose(provider.ledger, "refund", arguments={"order": "A-1", "amount": 20})
    assert small.status is ProposalStatus.APPROVED and small.decided_by == (
        "rule small refunds (policy v1)"
    )
    source = propose(provider.ledger, "write_file", arguments={"path": "/srv/a", "mode": "w"})
    _, grant = provider.ledger.approve_similar(
        source.proposal_id, "alice", patterns={"path": {"prefix": "/srv/"}}
    )
    granted = propose(provider.ledger, "write_file", arguments={"path": "/srv/b", "mode": "w"})
    assert granted.decided_by_rule == f"grant:{grant.grant_id}"
    hostile = "[red]x[/red]\x1b[2J"
    provider.ledger.append_trace(
        [
            TraceEvent(
                at=datetime.now(UTC), agent_id="billing-agent", thread_id="t-1", run_id="r",
                kind="approval", tool="refund", outcome_status="approved", reason_code="rule",
                payload={"proposal_id": small.proposal_id, "decided_by": hostile},
            )
        ]
    )  # fmt: skip
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        detail = screen.query_one(DetailPane)
        fields = screen.query_one("#detail-fields", Static)
        detail.show_proposal(small)
        await expect_drawn(pilot, fields, ["decided     by rule small refunds (policy v1) at"])
        detail.show_proposal(granted)
        # The line wraps in the pane: "... (policy" / "v1) at ...".
        await expect_drawn(pilot, fields, [f"decided     by grant {grant.grant_id} (policy"])
        assert "v1) at" in drawn_text(fields)
        trace = screen.query_one(TraceView)
        await wait_for(pilot, lambda: len(trace.events) == 1)
        await expect_drawn(pilot, trace, [f"by {hostile}"])
        await pilot.press("t", "up")
        await wait_for(pilot, lambda: detail.event is not None)
        await expect_drawn(pilot, fields, [f"decided by  {hostile}"])
        assert "[red]" in drawn_text(fields)  # shown as text, not applied as a style


def _trace_event(provider: SQLModelProvider, payload: dict[str, str]) -> None:
    """One tool call of billing-agent in the trace (what the operator picks with t, up)."""
    provider.ledger.append_trace(
        [
            TraceEvent(
                at=datetime.now(UTC), agent_id="billing-agent", thread_id="t-1", run_id="r",
                kind="tool_call", tool="lookup", outcome_status="ok", payload=payload,
            )
        ]
    )  # fmt: skip


async def test_a_trace_event_in_the_detail_stays_while_the_empty_inbox_refreshes(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    """The inbox announces its cursor after every change; with nothing pending that is "no
    proposal" again, which must not blank the trace event the operator is reading."""
    _trace_event(provider, {"order": "A-1"})
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        detail = screen.query_one(DetailPane)
        trace = screen.query_one(TraceView)
        inbox = screen.query_one(InboxPane)
        await wait_for(pilot, lambda: len(trace.events) == 1)
        await pilot.press("t", "up")
        await wait_for(pilot, lambda: detail.event is not None)
        fields = screen.query_one("#detail-fields", Static)
        await expect_drawn(pilot, fields, ["agent       billing-agent"])
        inbox.rebuild([])  # what every inbox change does: redraw, then announce the cursor
        await pilot.pause()
        await pilot.pause()
        assert detail.event is not None and detail.proposal is None
        await expect_drawn(pilot, fields, ["agent       billing-agent"])


async def test_a_trace_event_in_the_detail_stays_while_proposals_arrive_until_the_inbox_is_used(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    """With proposals pending, every inbox change re-announces the row under the cursor; the
    trace event the operator chose stays in the detail until they point at the inbox again
    (and no decision key applies meanwhile: nothing is selected)."""
    propose(provider.ledger, "refund", arguments={"order": "P-1", "amount": 5})
    _trace_event(provider, {"order": "A-1"})
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        detail = screen.query_one(DetailPane)
        trace = screen.query_one(TraceView)
        inbox = screen.query_one(InboxPane)
        fields = screen.query_one("#detail-fields", Static)
        await wait_for(pilot, lambda: len(trace.events) == 1 and screen.guard is not None)
        await pilot.press("t", "up")
        await wait_for(pilot, lambda: detail.event is not None)
        await expect_drawn(pilot, fields, ["agent       billing-agent"])
        # A second proposal arrives through the ledger's feed while the event is read.
        arrived = propose(provider.ledger, "refund", arguments={"order": "P-2", "amount": 7})
        await wait_for(pilot, lambda: arrived.proposal_id in inbox.proposals)
        await pilot.pause()
        assert detail.event is not None and detail.proposal is None
        assert not screen.selection.pending  # the decision keys do not apply to the event
        await expect_drawn(pilot, fields, ["agent       billing-agent"])
        # Focusing the inbox brings its row under the cursor back into the detail.
        await pilot.press("i")
        await wait_for(pilot, lambda: detail.proposal is not None)
        highlighted = inbox.highlighted()
        assert detail.proposal is not None and highlighted is not None
        assert detail.proposal.proposal_id == highlighted.proposal_id
        await wait_for(pilot, lambda: screen.guard is not None)


async def test_a_key_in_the_focused_empty_inbox_shows_the_proposal_that_arrived_since(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    """The operator reads a trace event, focuses the empty inbox (the event stays: there is
    no row to show), a proposal arrives (the event still stays), then a key in the inbox
    shows the proposal under the cursor."""
    _trace_event(provider, {})
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        detail = screen.query_one(DetailPane)
        trace = screen.query_one(TraceView)
        inbox = screen.query_one(InboxPane)
        await wait_for(pilot, lambda: len(trace.events) == 1)
        await pilot.press("t", "up")
        await wait_for(pilot, lambda: detail.event is not None)
        await pilot.press("i")
        await pilot.pause()
        assert screen.focused is inbox.table and detail.event is not None
        arrived = propose(provider.ledger, "refund", arguments={"order": "P-3", "amount": 9})
        await wait_for(pilot, lambda: arrived.proposal_id in inbox.proposals)
        await pilot.pause()
        assert detail.event is not None and detail.proposal is None
        await pilot.press("up")  # the cursor stays on the only row: still a key on it
        await wait_for(pilot, lambda: detail.proposal is not None)
        assert detail.proposal is not None and detail.proposal.proposal_id == arrived.proposal_id
