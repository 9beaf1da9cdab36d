"""What the main screen says matches what happened: decisions taken elsewhere on the selected
proposal are announced, risk reads the same in the inbox and the detail, dialogs show keys."""

from __future__ import annotations

from tui_helpers import drawn_text, main_screen, propose, record_notifications, wait_for

from screens.app import make_app
from screens.edit_arguments_screen import EditArgumentsScreen
from screens.reason_dialog import ReasonDialog
from screens.run_dialog import RunDialog
from screens.widgets.detail.detail_pane import DetailPane
from screens.widgets.inbox.inbox_list import COLUMNS
from screens.widgets.inbox.inbox_pane import InboxPane
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (150, 45)


def dialog_text(app: object) -> str:
    screen = getattr(app, "screen")  # noqa: B009 - the dialog on top
    return "\n".join(drawn_text(w) for w in screen.query(".dialog-question, .dialog-keys"))


async def test_a_decision_taken_elsewhere_on_the_selected_proposal_is_announced(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    first = propose(provider.ledger, tool="create_customer")
    second = propose(provider.ledger, tool="send_invoice")
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        assert screen.selection.is_selected(first.proposal_id)
        provider.ledger.reject(first.proposal_id, "alice@elsewhere", "not now", via="cli")
        await wait_for(pilot, lambda: any("alice@elsewhere" in note for note in notes))
        note = next(note for note in notes if "alice@elsewhere" in note)
        assert note.startswith("alice@elsewhere rejected create_customer at ")
        assert "left the inbox" in note
        # The cursor moved on to the next proposal, which is now selected.
        assert screen.selection.is_selected(second.proposal_id)

        # Our own decision is recorded as ours, not announced as someone else's.
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("a")
        await wait_for(pilot, lambda: any(n.startswith("Approved") for n in notes))
        assert not any("send_invoice at" in n for n in notes), notes


async def test_risk_reads_the_same_in_the_inbox_and_the_detail(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    refund = propose(provider.ledger, tool="refund", domains=["payments"], risk="low")
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.selection.is_selected(refund.proposal_id))
        inbox = screen.query_one(InboxPane)
        detail = screen.query_one(DetailPane)
        await wait_for(pilot, lambda: "risk high" in drawn_text(detail.query_one("#detail-fields")))
        names = [name for name, _, _ in COLUMNS]
        assert dict(zip(names, inbox._row_cells(refund.proposal_id), strict=True))["risk"] == "high"


async def test_dialogs_draw_their_keys(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    propose(provider.ledger)
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonDialog))
        await pilot.pause(0.1)
        assert "Esc Back" in dialog_text(app) and "Enter Submit" in dialog_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EditArgumentsScreen))
        await pilot.pause(0.1)
        assert "Ctrl+S Save as new proposal" in dialog_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, RunDialog))
        await pilot.pause(0.1)
        assert "Esc Back" in dialog_text(app)
