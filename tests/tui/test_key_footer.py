"""The main screen's footer follows its keys and skips rebuilds that would draw the same."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets._footer import FooterKey
from tui_helpers import main_screen, propose, wait_for

from screens.app import make_app
from screens.widgets.key_footer import KeyFooter
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (160, 50)


async def test_the_footer_shows_a_key_that_became_usable_and_rebuilds_only_on_a_change(
    provider: SQLModelProvider,
    settings: SupervisorSettings,
    identity: ApproverIdentity,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        footer = screen.query_one(KeyFooter)

        def approve_usable() -> bool:
            keys = [key for key in footer.query(FooterKey) if key.action == "approve"]
            return bool(keys) and not keys[0].disabled

        propose(provider.ledger)
        await wait_for(pilot, lambda: screen.guard is not None)
        await wait_for(pilot, approve_usable)

        rebuilds: list[Any] = []
        original = footer.recompose

        async def counted() -> None:
            rebuilds.append(None)
            await original()

        monkeypatch.setattr(footer, "recompose", counted)
        screen.refresh_bindings()
        await pilot.pause()
        screen.refresh_bindings()
        await pilot.pause()
        assert rebuilds == []  # the same keys: nothing rebuilt
        assert approve_usable()
        shown = [key.key for key in footer.query(FooterKey)]
        await pilot.press("t")  # the trace takes the focus: its keys replace the inbox's
        await wait_for(pilot, lambda: len(rebuilds) == 1)
        await pilot.pause()
        assert [key.key for key in footer.query(FooterKey)] != shown
