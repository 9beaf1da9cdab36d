"""A burst of proposals (a team's agents after a deploy, many expiring together: more than
three at once) rings the operator's bell and raises a desktop notification once, not once per
proposal; the toast names the first and how many more. And an expired proposal leaves the
inbox by itself."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

from textual.pilot import Pilot
from tui_helpers import main_screen, propose, toast_text, wait_for

from screens.app import SupervisorApp, make_app
from screens.main_screen import MainScreen
from screens.messages import InboxChanged
from screens.widgets.inbox.inbox_pane import InboxPane
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.services.approvals import InboxChange
from supervisor.services.identity import ApproverIdentity
from supervisor.services.notify import Notifier
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (160, 50)


def _burst(count: int, *, expires_in: float) -> tuple[Proposal, ...]:
    """Pending proposals as the feed delivers a page of them (an hour old, so not short-lived)."""
    now = datetime.now(UTC)
    return tuple(
        Proposal(
            proposal_id=f"burst-{n:03d}",
            tool_name="refund",
            tool_schema_hash="0" * 64,
            arguments={"n": n},
            args_hash=f"{n:064x}",
            status=ProposalStatus.PENDING,
            created_at=now - timedelta(hours=1),
            updated_at=now,
            expires_at=now + timedelta(seconds=expires_in),
            owner=f"agent-{n}",
        )
        for n in range(count)
    )


@contextlib.asynccontextmanager
async def _console(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> AsyncIterator[tuple[SupervisorApp, Pilot[None], MainScreen, list[str]]]:
    """The console on a ledger with one proposal, its bell written to the list yielded."""
    propose(provider.ledger, "lookup", arguments={"n": 0})
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        written: list[str] = []
        screen.notifier = Notifier({"bell"}, written.append)
        yield app, pilot, screen, written


async def test_a_burst_of_new_and_expiring_proposals_rings_once_each(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    # The console's clock starts an hour back, so no reminder can be due (and ring) before the
    # burst's own bell is counted; the tick's reminder is a second's race otherwise.
    clock = [datetime.now(UTC) - timedelta(hours=1)]
    settings = dataclasses.replace(settings, now=lambda: clock[0])
    async with _console(provider, settings, identity) as (app, pilot, screen, written):
        burst = _burst(40, expires_in=120)  # inside the 300 s reminder window, once it is now
        screen.post_message(InboxChanged(InboxChange(upserted=burst)))
        await wait_for(pilot, lambda: "New proposal" in toast_text(app))
        assert "refund from agent-0 (+39 more)" in toast_text(app)
        assert written == ["\x07"]  # one bell for the forty
        # Now the next tick finds all forty about to expire: one reminder for them too.
        clock[0] = datetime.now(UTC)
        await wait_for(pilot, lambda: "Expiring soon" in toast_text(app), limit=5)
        assert "(+39 more)" in toast_text(app).split("Expiring soon", 1)[1]
        assert written == ["\x07", "\x07"]
        assert screen.notifier is not None
        assert screen.notifier.sent == 2


async def test_an_expired_proposal_leaves_the_inbox_on_its_own(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    short = propose(provider.ledger, "refund", arguments={"n": 1}, ttl_seconds=1.5)
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = main_screen(app)
        inbox = screen.query_one(InboxPane)
        await wait_for(pilot, lambda: short.proposal_id in inbox.proposals)
        await wait_for(pilot, lambda: short.proposal_id not in inbox.proposals, limit=8)
    assert provider.ledger.get(short.proposal_id).status is ProposalStatus.EXPIRED


async def test_new_proposals_arriving_page_after_page_raise_one_toast_at_a_time(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    """A busy team ledger delivers a page of new proposals every moment: the toasts do not
    stack. The first is told at once; what comes while it is up is told in the next one."""
    async with _console(provider, settings, identity) as (app, pilot, screen, written):
        for proposal in _burst(3, expires_in=3600):  # three pages of one, back to back
            screen.post_message(InboxChanged(InboxChange(upserted=(proposal,))))
            await pilot.pause(0.1)
        await wait_for(pilot, lambda: "New proposal" in toast_text(app))
        await pilot.pause(0.5)
        assert toast_text(app).count("New proposal") == 1
        assert "refund from agent-0" in toast_text(app)
        assert "more)" not in toast_text(app)
        assert written == ["\x07"] * 3  # the bell is not held: one per page
        # Once that toast's time is up, one toast tells the two that came meanwhile.
        await wait_for(pilot, lambda: "refund from agent-1 (+1 more)" in toast_text(app), limit=8)
        assert toast_text(app).count("New proposal") == 1
