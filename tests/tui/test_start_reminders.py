"""Proposals already pending when the console starts are not news: none is announced, and one
whose whole lifetime is shorter than the reminder window gets no "Expiring soon" reminder
either (its owner was told when it was made). That holds however the inbox's first pages and
the screen's mount interleave: here the first page is read before the screen mounts and the
rest after, as happens on a large ledger."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest
from tui_helpers import main_screen, propose, toast_text, wait_for

from screens.app import SupervisorApp, make_app
from screens.widgets.inbox.inbox_pane import InboxPane
from supervisor.ledger.models import ProposalStatus
from supervisor.services.identity import ApproverIdentity
from supervisor.services.notify import Notifier
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (160, 50)


async def test_short_lived_proposals_pending_at_start_get_no_reminder(
    provider: SQLModelProvider,
    settings: SupervisorSettings,
    identity: ApproverIdentity,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = provider.ledger
    # Two minutes to live: inside the 300 s reminder window from the start.
    made = [propose(ledger, "refund", arguments={"n": n}, ttl_seconds=120) for n in range(5)]
    first_page_read = threading.Event()
    rest_released = threading.Event()
    real_list = ledger.list

    def paged(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("status") is ProposalStatus.PENDING and kwargs.get("cursor") is not None:
            assert rest_released.wait(10), "the test never released the later pages"
        page = real_list(*args, **kwargs)
        first_page_read.set()
        return page

    monkeypatch.setattr(ledger, "list", paged)

    def services_first(app: SupervisorApp) -> None:
        # The inbox service reads its first page before the main screen mounts.
        app._start(app.services)
        assert first_page_read.wait(10)
        app.push_screen(app.first_screen)

    monkeypatch.setattr(SupervisorApp, "on_mount", services_first)
    paged_settings = replace(settings, inbox_first_page=2, inbox_page=2)
    app = make_app(paged_settings, ledger=ledger, identity=identity)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = main_screen(app)
        inbox = screen.query_one(InboxPane)
        await wait_for(pilot, lambda: len(inbox.proposals) == 2)
        written: list[str] = []
        screen.notifier = Notifier({"bell"}, written.append)
        rest_released.set()
        await wait_for(pilot, lambda: set(inbox.proposals) == {p.proposal_id for p in made})
        await pilot.pause(2.5)  # two reminder ticks
        assert "Expiring soon" not in toast_text(app)
        assert "New proposal" not in toast_text(app)
        assert written == []
        assert screen.notifier.sent == 0
