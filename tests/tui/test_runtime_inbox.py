"""One inbox for every runtime: the runtime column and filter, session grouping, and batch
approval that never crosses an assistant turn (headless services and the pane's own logic)."""

from __future__ import annotations

import pytest
from tui_helpers import drawn_text, main_screen, propose, wait_for

from screens.app import make_app
from screens.widgets.inbox.inbox_pane import InboxPane, matches, session_key
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.approvals import ApprovalsService
from supervisor.services.guard import RenderGuardMissing
from supervisor.services.identity import ApproverIdentity
from supervisor.services.rendering import render_arguments
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

_HASH = "c" * 64


def _bash(ledger: ApprovalLedger, session: str, turn: str | None) -> Proposal:
    return ledger.propose(
        "Bash", _HASH, {"command": "rm -rf build"}, execution_target={"runtime": "claude-code"},
        thread_id=session, runtime="claude-code", turn_id=turn, owner="claude-code",
    )  # fmt: skip


def test_batch_approval_of_another_runtime_stays_within_one_turn(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    first = _bash(ledger, "s1", "turn-1")
    twin = _bash(ledger, "s1", "turn-1")
    later_turn = _bash(ledger, "s1", "turn-2")
    other_session = _bash(ledger, "s2", "turn-1")
    unknown_turn = _bash(ledger, "s1", None)
    service = ApprovalsService(ledger, identity)
    service.load()
    assert {p.proposal_id for p in service.identical_pending(first)} == {
        first.proposal_id, twin.proposal_id
    }  # fmt: skip
    assert [p.proposal_id for p in service.identical_pending(unknown_turn)] == [
        unknown_turn.proposal_id
    ]
    guard = service.confirm_rendered(first, render_arguments(first.arguments))
    # Same tool and arguments, so the one guard covers them: the turn is what refuses.
    with pytest.raises(RenderGuardMissing, match="another assistant turn"):
        service.approve_batch([first.proposal_id, later_turn.proposal_id], guard)
    with pytest.raises(RenderGuardMissing, match="another assistant turn"):
        service.approve_batch([first.proposal_id, other_session.proposal_id], guard)
    assert all(
        ledger.get(p.proposal_id).status is ProposalStatus.PENDING
        for p in (first, later_turn, other_session)
    )
    batch = service.approve_batch([first.proposal_id, twin.proposal_id], guard)
    assert {p.proposal_id for p in batch.approved} == {first.proposal_id, twin.proposal_id}
    assert ledger.get(later_turn.proposal_id).status is ProposalStatus.PENDING


def test_our_own_agents_twins_batch_across_agents_as_before(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    one = ledger.propose("refund", _HASH, {"amount": 5}, owner="agent-a", thread_id="t1")
    two = ledger.propose("refund", _HASH, {"amount": 5}, owner="agent-b", thread_id="t2")
    assert one.runtime == two.runtime == "sdk"
    service = ApprovalsService(ledger, identity)
    service.load()
    assert len(service.identical_pending(one)) == 2


def test_the_filter_matches_the_runtime_and_field_terms(provider: SQLModelProvider) -> None:
    ledger = provider.ledger
    claude = _bash(ledger, "sess-42", "t")
    mcp = ledger.propose(
        "write_file", _HASH, {"p": "x"}, execution_target={"mcp_server": "fs"}, runtime="mcp:fs"
    )
    # Our own agent's call of an MCP tool: the target says where it runs, the runtime is ours.
    own = ledger.propose("write_file", _HASH, {"p": "x"}, execution_target={"mcp_server": "fs"})
    assert (mcp.runtime, own.runtime) == ("mcp:fs", "sdk")
    assert matches(claude, "claude") and not matches(mcp, "claude")
    assert matches(mcp, "runtime:mcp") and not matches(claude, "runtime:mcp")
    assert matches(claude, "session:sess-4 bash")
    assert not matches(claude, "session:other")
    # A term with a colon that names no field is plain text (an MCP runtime, say).
    assert matches(mcp, "mcp:fs")
    ordered = sorted([mcp, claude], key=session_key)
    assert [p.runtime for p in ordered] == ["claude-code", "mcp:fs"]


async def test_the_runtime_column_shows_while_another_runtime_waits_and_sessions_group(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    own = propose(ledger, "refund_card")
    app = make_app(settings, ledger=ledger, identity=identity)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = main_screen(app)
        inbox = screen.query_one(InboxPane)
        await wait_for(pilot, lambda: own.proposal_id in inbox.visible_ids())
        assert "runtime" not in drawn_text(inbox.table)  # our own agents only: as before
        late = _bash(ledger, "s-a", "t1")
        other = _bash(ledger, "s-b", "t1")
        again = _bash(ledger, "s-a", "t2")
        await wait_for(pilot, lambda: len(inbox.visible_ids()) == 4)
        await wait_for(pilot, lambda: "runtime" in drawn_text(inbox.table))
        assert "claude-code" in drawn_text(inbox.table)
        assert inbox.visible_ids() == [p.proposal_id for p in (own, late, other, again)]
        await pilot.press("colon")
        await pilot.press(*"sessions", "enter")
        await wait_for(pilot, lambda: inbox.grouped)
        # Grouped: Claude Code's session s-a together, then s-b, then our own agents (sdk).
        assert inbox.visible_ids() == [p.proposal_id for p in (late, again, other, own)]
        inbox.query_one("#inbox-filter").focus()
        await pilot.press(*"runtime:claude session:s-b")
        await wait_for(pilot, lambda: inbox.visible_ids() == [other.proposal_id])
