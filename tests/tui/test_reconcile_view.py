"""Pilot tests: the TUI recovers a call whose executor died mid-call by itself (at start, and
while it runs), and the reconciliation view shows what ran, where it stopped and its thread's
last events, literally, and records the operator's finding.

The dead executor is a real process that was started and reaped (its pid is really gone); the
ledger is a real SQLite file. Nothing in these tests calls ``recover()``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from datetime import UTC, datetime

from textual.widgets import DataTable, Static
from textual.widgets._footer import FooterKey
from tui_helpers import (
    HOSTILE,
    assert_drawn_literally,
    drawn_text,
    main_screen,
    propose,
    record_notifications,
    wait_for,
)

from screens.app import make_app
from screens.key_hints import key_hints
from screens.reason_dialog import ReasonDialog
from screens.reconcile_screen import ReconcileScreen
from screens.widgets.key_footer import KeyFooter
from supervisor.ledger.models import ExecutorIdentity, Proposal, ProposalStatus, TraceEvent
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (200, 60)
HOST = socket.gethostname()


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def stranded(ledger: ApprovalLedger, tool: str = "charge_card", **overrides: object) -> Proposal:
    """An approved call claimed by a process that is gone: left ``executing``."""
    proposal = propose(ledger, tool, **overrides)
    ledger.approve(proposal.proposal_id, "op")
    executor = ExecutorIdentity(executor_id="agent:billing", pid=dead_pid(), host=HOST)
    ledger.claim(proposal.proposal_id, proposal.args_hash, executor)
    return proposal


def footer_text(app: object) -> str:
    """The keys the footer of the current screen shows within the terminal's width."""
    screen = getattr(app, "screen")  # noqa: B009 - the footer of the screen shown now
    for footer in screen.query(KeyFooter):  # the main screen's one-line footer
        return "  ".join(f"{key.display} {key.description}" for key in footer.visible_entries())
    shown = [key for key in screen.query(FooterKey) if key.region.right <= SIZE[0]]
    return "  ".join(f"{key.key_display} {key.description}" for key in shown if key.region)


async def test_the_tui_recovers_at_start_and_names_the_key(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    proposal = stranded(ledger)
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.EXECUTING
    app = make_app(settings, ledger=ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.reconcile_waiting == 1)
        status = ledger.get(proposal.proposal_id).status
        assert status is ProposalStatus.NEEDS_RECONCILIATION
        await wait_for(pilot, lambda: any("press n" in note for note in notes))
        await wait_for(pilot, lambda: "Reconcile" in footer_text(app))


async def test_a_call_stranded_while_the_tui_runs_is_announced(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    app = make_app(settings, ledger=ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.pause(0.2)
        assert "Reconcile" not in footer_text(app)  # nothing to reconcile: no key
        stranded(ledger, owner="billing-agent")
        await wait_for(pilot, lambda: any("stopped mid-call" in note for note in notes))
        assert screen.reconcile_waiting == 1
        assert any("charge_card from billing-agent" in note for note in notes)


async def test_the_view_shows_the_stopped_call_literally_and_records_it_ran(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    hostile = {f"field{number}": text for number, text in enumerate(HOSTILE)}
    proposal = stranded(
        ledger, tool="charge[/]card", arguments=hostile, owner="[bold]billing[/bold]",
        execution_target={"endpoint": "[link=https://evil]pay[/link]"},
    )  # fmt: skip
    ledger.append_trace(
        [TraceEvent(at=datetime.now(UTC), agent_id="[bold]billing[/bold]", thread_id="t-1",
                    kind="tool_call", tool="charge[/]card", reason_code="[@click=app.quit]x[/]")]
    )  # fmt: skip
    app = make_app(settings, ledger=ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.reconcile_waiting == 1)
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, ReconcileScreen))
        view = app.screen
        assert isinstance(view, ReconcileScreen)
        await wait_for(pilot, lambda: "stopped before recording" in view.detail_text())
        table = view.query_one("#reconcile-table", DataTable)
        assert_drawn_literally(table, ["charge[/]card", "[bold]billing[/bold]"])
        what = view.query_one("#reconcile-what", Static)
        assert_drawn_literally(what, ["charge[/]card", "[link=https://evil]pay[/link]"])
        text = view.detail_text()
        for value in HOSTILE[:4]:  # markup stays text; escapes are shown as \u escapes
            assert value in text
        assert "\x1b" not in text and "\u202e" not in text and "\\u202e" in text
        assert f"on {HOST})" in text and "claimed" in text
        assert "tool_call charge[/]card [@click=app.quit]x[/]" in text
        assert "It ran" in footer_text(app) and "It did not take effect" in footer_text(app)

        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonDialog))
        dialog = app.screen
        keys = drawn_text(dialog.query_one(".dialog-keys", Static))
        assert key_hints(ReasonDialog.BINDINGS, [("Enter", "Submit")]) in keys
        assert "charge[/]card" in drawn_text(dialog.query_one(".dialog-question", Static))
        await pilot.press(*"On the statement", "enter")
        await wait_for(
            pilot, lambda: ledger.get(proposal.proposal_id).status is ProposalStatus.EXECUTED
        )
        await wait_for(pilot, lambda: "Nothing needs reconciliation" in view.detail_text())
        found = ledger.reconciliation(proposal.proposal_id)
        assert found is not None and found.outcome == "executed"
        assert found.reason == "On the statement" and found.reconciled_by == identity.approver_id
        [record] = [r for r in ledger.events_since(0) if r.action == "reconcile"]
        assert record.payload["context"]["via"] == "tui"
        await pilot.press("escape")
        await wait_for(pilot, lambda: screen.reconcile_waiting == 0)
        assert ledger.verify().ok


async def test_it_did_not_take_effect_records_failed_and_a_reason_is_required(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    first = stranded(ledger)
    second = stranded(ledger, tool="send_invoice")
    app = make_app(settings, ledger=ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.reconcile_waiting == 2)
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, ReconcileScreen))
        view = app.screen
        assert isinstance(view, ReconcileScreen)
        await wait_for(pilot, lambda: view.selected_id == first.proposal_id)
        await pilot.press("down")
        await wait_for(pilot, lambda: "send_invoice" in view.detail_text())
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonDialog))
        await pilot.press("enter")  # no reason: refused in the dialog
        assert isinstance(app.screen, ReasonDialog)
        assert "required" in drawn_text(app.screen.query_one("#reason-error", Static))
        await pilot.press(*"no invoice sent", "enter")
        await wait_for(
            pilot, lambda: ledger.get(second.proposal_id).status is ProposalStatus.FAILED
        )
        assert ledger.get(first.proposal_id).status is ProposalStatus.NEEDS_RECONCILIATION
        await wait_for(pilot, lambda: list(view.proposals) == [first.proposal_id])
        assert view.selected_id == first.proposal_id
