"""The inbox paints its first page at once and keeps loading the rest in the background."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from tui_helpers import propose, wait_for

from screens.app import make_app
from screens.main_screen import MainScreen
from screens.widgets.inbox.inbox_pane import InboxPane
from supervisor.ledger.models import ProposalPage, ProposalStatus
from supervisor.services.approvals import ApprovalsService, InboxChange
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (150, 45)


def gate_pages(provider: SQLModelProvider, monkeypatch: pytest.MonkeyPatch) -> threading.Semaphore:
    """Hold every pending page after the first until the test releases the semaphore."""
    gate = threading.Semaphore(0)
    original = provider.ledger.list

    def gated(**kwargs: Any) -> ProposalPage:
        if kwargs.get("cursor") is not None and kwargs.get("status") is ProposalStatus.PENDING:
            assert gate.acquire(timeout=10), "the test never released the page"
        return original(**kwargs)

    monkeypatch.setattr(provider.ledger, "list", gated)
    return gate


def test_load_publishes_a_small_first_page_then_the_rest(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    created = [propose(provider.ledger, owner=f"agent-{index}") for index in range(25)]
    settings = SupervisorSettings(inbox_first_page=5, inbox_page=10)
    service = ApprovalsService(provider.ledger, identity, settings)
    changes: list[InboxChange] = []
    service.subscribe(changes.append)
    service.load()
    assert [len(change.upserted) for change in changes] == [5, 10, 10]
    assert [change.loaded for change in changes] == [False, False, True]
    assert [p.proposal_id for p in service.pending()] == [p.proposal_id for p in created]


async def test_rows_keep_arriving_after_the_first_paint_and_decided_ones_leave(
    provider: SQLModelProvider, identity: ApproverIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = [propose(provider.ledger, owner=f"agent-{index:02d}") for index in range(60)]
    gate = gate_pages(provider, monkeypatch)
    settings = SupervisorSettings(poll_timeout=0.05, inbox_first_page=10, inbox_page=20)
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        inbox = screen.query_one(InboxPane)
        # First paint: the first page only, the first row selected, the rest still loading.
        await wait_for(pilot, lambda: len(inbox.visible_ids()) == 10)
        await wait_for(pilot, lambda: screen.selected is not None)
        assert not screen.approvals.loaded
        assert inbox.visible_ids() == [p.proposal_id for p in created[:10]]
        assert screen.selected is not None
        assert screen.selected.proposal_id == created[0].proposal_id

        # Decided by someone else while the inbox is loading: it leaves before the load ends.
        gone = created[3]
        provider.ledger.reject(gone.proposal_id, "alice@elsewhere", "not needed", via="cli")
        gate.release()
        await wait_for(pilot, lambda: len(inbox.visible_ids()) == 29)
        assert gone.proposal_id not in inbox.visible_ids()
        assert not screen.approvals.loaded

        gate.release()
        gate.release()
        await wait_for(pilot, lambda: screen.approvals.loaded and len(inbox.visible_ids()) == 59)
        assert inbox.visible_ids() == [p.proposal_id for p in created if p is not gone]
        assert screen.selected is not None
        assert screen.selected.proposal_id == created[0].proposal_id

        # The virtual list moves its cursor over rows that were never drawn.
        await pilot.press("i", "end")
        await wait_for(
            pilot, lambda: screen.selected is not None and screen.selected == created[-1]
        )
        assert inbox.table.visible_rows()[-1] == created[-1].proposal_id
        await pilot.press("home")
        await wait_for(pilot, lambda: screen.selected is not None and screen.selected == created[0])
