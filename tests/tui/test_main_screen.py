"""Pilot tests of the main screen on a real SQLite ledger: decisions change the ledger."""

from __future__ import annotations

import re
from dataclasses import replace
from time import monotonic

from textual import events
from textual.widgets import Static
from tui_helpers import drawn_text, main_screen, propose, record_notifications, wait_for

from screens.app import SupervisorApp, make_app
from screens.confirm_dialog import ConfirmDialog
from screens.edit_arguments_screen import EditArgumentsScreen
from screens.reason_dialog import ReasonDialog
from screens.widgets.detail.arguments_view import ArgumentsView
from screens.widgets.detail.detail_pane import DetailPane
from screens.widgets.inbox.inbox_pane import InboxPane
from supervisor.ledger.models import ProposalStatus
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (150, 45)


async def test_approve_changes_the_ledger_with_tui_identity(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    proposal = propose(provider.ledger)
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        assert screen.key_at is None
        await pilot.press("enter")  # Enter never approves
        # Enter is bound to nothing, so the app shows nothing for it; the screen records when
        # each key reached it, which proves this one was handled before the check below.
        await wait_for(pilot, lambda: screen.key_at is not None)
        await app.workers.wait_for_complete()  # no decision is still on its way to the ledger
        assert app.screen is screen
        assert provider.ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
        await pilot.press("a")
        await wait_for(
            pilot,
            lambda: provider.ledger.get(proposal.proposal_id).status is ProposalStatus.APPROVED,
        )
        decided = provider.ledger.get(proposal.proposal_id)
        assert decided.approver_id == "tester@testhost#test01"
        assert decided.approver_context is not None and decided.approver_context.via == "tui"
        await wait_for(
            pilot,
            lambda: proposal.proposal_id not in [p.proposal_id for p in screen.approvals.pending()],
        )


async def test_guard_blocks_approval_until_every_argument_line_was_drawn(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    arguments = {f"line_{index:03d}": "x" * 10 for index in range(120)}
    proposal = propose(provider.ledger, arguments=arguments)
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.selected is not None)
        fields = screen.query_one("#detail-fields", Static)
        await wait_for(
            pilot, lambda: bool(re.search(r"shown \d+/\d+ rows — scroll", drawn_text(fields)))
        )
        assert screen.guard is None
        await pilot.press("a")
        await wait_for(
            pilot, lambda: any("Scroll through all of the arguments" in n for n in notes)
        )
        await app.workers.wait_for_complete()
        assert provider.ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
        # The service refuses too, whatever the UI does.
        assert not screen.approvals.has_guard(proposal.proposal_id)
        await pilot.press("d")
        for _ in range(40):
            if screen.guard is not None:
                break
            await pilot.press("pagedown")
            await pilot.pause(0.05)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("a")
        await wait_for(
            pilot,
            lambda: provider.ledger.get(proposal.proposal_id).status is ProposalStatus.APPROVED,
        )


def _key_at(app: SupervisorApp, key: str, when: float) -> None:
    """Deliver ``key`` as the terminal driver does, stamped as having arrived at ``when``."""
    event = events.Key(key, key if len(key) == 1 else None)
    event.time = when
    event.set_sender(app)
    assert app._driver is not None
    app._driver.send_message(event)


async def test_a_key_that_arrived_before_the_proposal_was_shown_decides_nothing(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    """A row vanishing under the cursor must not turn a key meant for it into its neighbour's
    approval: a decision key counts only once the proposal was on screen for the settle time."""
    first = propose(provider.ledger, arguments={"name": "Ada"})
    second = propose(provider.ledger, arguments={"name": "Grace"})
    settled = replace(settings, decision_settle_seconds=0.5)
    app = make_app(settled, ledger=provider.ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.shown_at is not None)
        assert screen.guard is not None and screen.guard.proposal_id == first.proposal_id
        assert screen.shown_at is not None
        _key_at(app, "a", screen.shown_at + 0.1)
        await wait_for(pilot, lambda: any("0.1s after it was shown" in note for note in notes))
        assert provider.ledger.get(first.proposal_id).status is ProposalStatus.PENDING

        _key_at(app, "a", screen.shown_at + 0.6)
        await wait_for(
            pilot,
            lambda: provider.ledger.get(first.proposal_id).status is ProposalStatus.APPROVED,
        )
        # The approved row leaves the inbox and the cursor lands on the other proposal. A key
        # that arrived before that proposal was drawn (meant for the first one) decides nothing.
        await wait_for(
            pilot,
            lambda: screen.guard is not None and screen.guard.proposal_id == second.proposal_id,
        )
        second_shown = screen.shown_at
        assert second_shown is not None
        _key_at(app, "a", second_shown - 0.05)
        await wait_for(pilot, lambda: any("before it was on screen" in note for note in notes))
        assert provider.ledger.get(second.proposal_id).status is ProposalStatus.PENDING

        # A real key pressed once the settle time has passed approves it.
        while monotonic() - second_shown < 0.5:
            await pilot.pause(0.05)
        await pilot.press("a")
        await wait_for(
            pilot,
            lambda: provider.ledger.get(second.proposal_id).status is ProposalStatus.APPROVED,
        )


async def test_reject_asks_for_a_reason(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    proposal = propose(provider.ledger)
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.selected is not None)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonDialog))
        dialog = app.screen
        await pilot.press("enter")  # empty reason is refused
        error = dialog.query_one("#reason-error", Static)
        await wait_for(pilot, lambda: "A reason is required." in drawn_text(error))
        await app.workers.wait_for_complete()
        assert app.screen is dialog
        assert provider.ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
        await pilot.press(*"wrong tier")
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: provider.ledger.get(proposal.proposal_id).status is ProposalStatus.REJECTED,
        )
        assert provider.ledger.get(proposal.proposal_id).decision_reason == "wrong tier"


async def test_edit_creates_a_superseding_proposal(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    proposal = propose(provider.ledger, arguments={"name": "Ada", "tier": "gold"})
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EditArgumentsScreen))
        editor = app.screen.query_one("#edit-text")
        editor.text = '{"name": "Ada", "tier": "silver"}'  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await wait_for(
            pilot,
            lambda: provider.ledger.get(proposal.proposal_id).status is ProposalStatus.SUPERSEDED,
        )
        old = provider.ledger.get(proposal.proposal_id)
        assert old.superseded_by_id is not None
        new = provider.ledger.get(old.superseded_by_id)
        assert new.arguments == {"name": "Ada", "tier": "silver"}
        assert new.status is ProposalStatus.PENDING
        assert any('$.tier: "gold" → "silver"' in note for note in notes)


async def test_after_an_edit_the_selection_follows_to_the_new_proposal(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    """The edited row leaves the inbox and its successor sorts last: the cursor must not stay
    on the row that took the old one's place (``a`` would then approve another call)."""
    proposal = propose(provider.ledger, arguments={"name": "Ada", "tier": "gold"})
    other = propose(provider.ledger, tool="send_invoice", arguments={"to": "bob"})
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        assert screen.selected is not None and screen.selected.proposal_id == proposal.proposal_id
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EditArgumentsScreen))
        editor = app.screen.query_one("#edit-text")
        editor.text = '{"name": "Ada", "tier": "silver"}'  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await wait_for(
            pilot,
            lambda: provider.ledger.get(proposal.proposal_id).status is ProposalStatus.SUPERSEDED,
        )
        new_id = provider.ledger.get(proposal.proposal_id).superseded_by_id
        await wait_for(
            pilot, lambda: screen.selected is not None and screen.selected.proposal_id == new_id
        )
        await pilot.pause(0.3)  # later inbox changes do not move it to the other row
        assert screen.selected is not None and screen.selected.proposal_id == new_id
        assert screen.selected.proposal_id != other.proposal_id


async def test_edit_refuses_invalid_json(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    proposal = propose(provider.ledger)
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EditArgumentsScreen))
        app.screen.query_one("#edit-text").text = "[1, 2]"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        error = app.screen.query_one("#edit-error")
        await wait_for(pilot, lambda: "JSON object" in str(error.render()))
        assert isinstance(app.screen, EditArgumentsScreen)
        assert provider.ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING


async def test_conflict_names_the_winner(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    proposal = propose(provider.ledger)
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        screen.approvals.stop()  # freeze the inbox so this supervisor has not seen the decision
        provider.ledger.approve(proposal.proposal_id, "alice@elsewhere", "looks fine", via="cli")
        await pilot.press("a")
        await wait_for(pilot, lambda: any("alice@elsewhere" in note for note in notes))
        conflict = next(note for note in notes if "alice@elsewhere" in note)
        assert conflict.startswith("Already approved by alice@elsewhere at ")


async def test_high_risk_domain_needs_a_second_confirmation(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    proposal = propose(provider.ledger, tool="refund", domains=["payments"])
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        question = app.screen.query_one(".dialog-question", Static)
        await wait_for(
            pilot, lambda: "touches high-risk domains (payments)" in drawn_text(question)
        )
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is screen)
        await app.workers.wait_for_complete()
        assert provider.ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: provider.ledger.get(proposal.proposal_id).status is ProposalStatus.APPROVED,
        )


async def test_batch_approves_identical_proposals_once(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    twins = [propose(provider.ledger) for _ in range(3)]
    other = propose(provider.ledger, arguments={"name": "Grace", "tier": "gold"})
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        question = app.screen.query_one(".dialog-question", Static)
        await wait_for(
            pilot, lambda: "Approve 3 identical create_customer proposals" in drawn_text(question)
        )
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: all(
                provider.ledger.get(t.proposal_id).status is ProposalStatus.APPROVED for t in twins
            ),
        )
        assert provider.ledger.get(other.proposal_id).status is ProposalStatus.PENDING


async def test_filter_narrows_the_inbox_and_new_proposals_arrive_live(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    propose(provider.ledger, tool="create_customer", owner="crm-agent")
    propose(provider.ledger, tool="inventory_adjust", owner="stock-agent", domains=["inventory"])
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        inbox = screen.query_one(InboxPane)
        await wait_for(pilot, lambda: len(inbox.visible_ids()) == 2)
        await pilot.press("slash", *"stock")
        await wait_for(pilot, lambda: len(inbox.visible_ids()) == 1)
        shown = inbox.proposals[inbox.visible_ids()[0]]
        assert shown.owner == "stock-agent"
        late = propose(provider.ledger, tool="inventory_count", owner="stock-agent")
        await wait_for(pilot, lambda: late.proposal_id in inbox.visible_ids())
        hidden = propose(provider.ledger, tool="send_email", owner="mail-agent")
        await wait_for(pilot, lambda: hidden.proposal_id in inbox.proposals)
        assert len(inbox.visible_ids()) == 2
        detail = screen.query_one(DetailPane)
        assert detail.proposal is not None


async def test_keys_typed_faster_than_the_screen_draws_go_where_the_user_sent_them(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    """A focus key moves focus before the next key is handled, however fast keys arrive."""
    # Arguments taller than the detail pane, so a PageDown that reaches it scrolls it.
    arguments = {f"line_{index:03d}": "x" * 10 for index in range(120)}
    first = propose(provider.ledger, owner="crm-agent", arguments=arguments)
    propose(provider.ledger, tool="inventory_adjust", owner="stock-agent", domains=["inventory"])
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        inbox = screen.query_one(InboxPane)
        detail = screen.query_one(ArgumentsView)
        await wait_for(pilot, lambda: len(inbox.visible_ids()) == 2 and detail.rows_seen[0] > 0)
        assert detail.scroll_y == 0
        # "d" then PageDown in one burst: PageDown scrolls the detail pane, not the inbox.
        now = monotonic()
        _key_at(app, "d", now)
        _key_at(app, "pagedown", now)
        await wait_for(pilot, lambda: app.focused is detail and detail.scroll_y > 0)
        assert screen.selected is not None and screen.selected.proposal_id == first.proposal_id
        # "/" then text in one burst: the text filters, its "c" does not open the cancel dialog.
        for key in ("slash", *"crm"):
            _key_at(app, key, monotonic())
        await wait_for(pilot, lambda: len(inbox.visible_ids()) == 1)
        assert app.screen is screen
        assert provider.ledger.get(first.proposal_id).status is ProposalStatus.PENDING


async def test_cancel_and_extend(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    proposal = propose(provider.ledger)
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.selected is not None)
        await pilot.press("x")
        await wait_for(
            pilot,
            lambda: provider.ledger.get(proposal.proposal_id).expires_at > proposal.expires_at,
        )
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonDialog))
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: provider.ledger.get(proposal.proposal_id).status is ProposalStatus.CANCELLED,
        )
        await wait_for(pilot, lambda: screen.selected is None)
        assert screen.check_action("approve", ()) is None
