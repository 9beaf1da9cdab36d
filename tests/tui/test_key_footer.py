"""The main screen's footer follows its keys, repaints only when they change, and runs a key
that is clicked (a disabled one only rings the bell)."""

from __future__ import annotations

from tui_helpers import drawn_text, main_screen, propose, wait_for

from screens.app import make_app
from screens.help_screen import HelpScreen
from screens.widgets.key_footer import KeyFooter
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (160, 50)


async def test_the_footer_shows_a_key_that_became_usable_and_changes_only_on_a_change(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        footer = screen.query_one(KeyFooter)

        def approve_usable() -> bool:
            return any(e.action == "approve" and e.enabled for e in footer.entries)

        propose(provider.ledger)
        await wait_for(pilot, lambda: screen.guard is not None)
        await wait_for(pilot, approve_usable)
        assert "a Approve" in drawn_text(footer)

        entries = footer.entries
        screen.refresh_bindings()
        await pilot.pause()
        screen.refresh_bindings()
        await pilot.pause()
        assert footer.entries is entries  # the same keys: nothing recomputed into the view
        await pilot.press("t")  # the trace takes the focus: its keys replace the inbox's
        await wait_for(pilot, lambda: footer.entries is not entries)
        await pilot.pause()
        assert footer.entries != entries
        assert drawn_text(footer).startswith("end Follow tail")
        assert footer.visible_entries()[-1].action == "command_palette"
        assert drawn_text(footer).rstrip().endswith("^p palette")


async def test_a_click_on_a_footer_key_runs_it_and_a_disabled_key_does_nothing(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        footer = screen.query_one(KeyFooter)
        await wait_for(pilot, lambda: bool(footer.entries))
        await pilot.pause()
        text = drawn_text(footer)
        approve = next(e for e in footer.entries if e.action == "approve")
        assert not approve.enabled  # nothing selected in an empty inbox
        bells: list[None] = []
        app.bell = lambda: bells.append(None)  # type: ignore[method-assign]
        await pilot.click(KeyFooter, offset=(text.index("a Approve"), 0))
        await pilot.pause()
        assert bells == [None] and app.screen is screen
        await pilot.click(KeyFooter, offset=(text.index("? Help"), 0))
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
