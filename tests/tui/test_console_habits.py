"""Pilot tests of the console habits on a real SQLite ledger: ``?``/F1 help listing every key,
``:`` command mode with completion, ``y`` copy (the OSC 52 clipboard), and a filter that
matches nothing saying so."""

from __future__ import annotations

from textual.widgets import Input, Static
from tui_helpers import drawn_text, main_screen, propose, wait_for

from screens.app import SupervisorApp, make_app
from screens.command_bar import CommandBar
from screens.copy_dialog import CopyDialog
from screens.grants_screen import GrantsScreen
from screens.help_screen import HelpScreen
from screens.review_screen import ReviewScreen
from screens.widgets.processes.processes_pane import ProcessesPane
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (160, 50)


def _help_rows(app: SupervisorApp) -> dict[str, tuple[str, str]]:
    screen = app.screen
    assert isinstance(screen, HelpScreen)
    return {what: (keys, state) for keys, what, state in screen.rows}


async def test_question_mark_and_f1_list_every_key_of_the_screen(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_screen(app).is_mounted)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        rows = _help_rows(app)
        # Every key of the main screen, the ones with nothing to act on included.
        assert rows["Approve"] == ("a", "not now")  # no proposal selected
        assert rows["Copy"][0] == "y" and rows["Command"][0] == ":"
        assert rows["Help"][0] == "?/f1" and "q" in rows["Quit"][0].split("/")
        assert rows["Filter"] == ("/", "")
        shown = drawn_text(app.screen.query_one("#help-keys")).splitlines()
        assert len(shown) == len(rows) + 1 and shown[0].split() == ["Key", "What", "it", "does"]
        assert any(line.split()[:2] == ["a", "Approve"] for line in shown)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))
        propose(provider.ledger, "refund_card")
        await wait_for(pilot, lambda: main_screen(app).selection.proposal is not None)
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert _help_rows(app)["Approve"] == ("a", "")  # now there is something to approve
        await pilot.press("f1")  # the help's own key closes it
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.press("G")
        await wait_for(pilot, lambda: isinstance(app.screen, GrantsScreen))
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert isinstance(app.screen, HelpScreen) and "GrantsScreen" in app.screen.title_text
        assert "Approve" not in _help_rows(app)  # the grants view's keys, not the inbox's


async def test_command_mode_completes_switches_and_refuses_unknown_commands(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.is_mounted)
        await pilot.press("colon")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandBar))
        field = app.screen.query_one("#command-input", Input)
        await pilot.press(*"proc")
        await wait_for(pilot, lambda: field.value == "proc")
        await pilot.press("tab")
        await wait_for(pilot, lambda: field.value == "processes")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.focused, ProcessesPane))
        await pilot.press("colon")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandBar))
        await pilot.press(*"bogus[/]", "enter")
        error = app.screen.query_one("#command-error", Static)
        await wait_for(pilot, lambda: "no command 'bogus[/]'" in drawn_text(error))
        assert isinstance(app.screen, CommandBar)  # nothing ran
        app.screen.query_one("#command-input", Input).value = "theme nord"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.theme == "nord")
        await pilot.press("colon", *"gr", "enter")  # a unique prefix is enough
        await wait_for(pilot, lambda: isinstance(app.screen, GrantsScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("colon", *"review", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen))
        await pilot.press("b")
        await wait_for(pilot, lambda: app.screen is screen)


async def test_y_copies_the_selected_id_hash_or_arguments_to_the_clipboard(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    proposal = propose(provider.ledger, "refund_card", arguments={"note": "a\u202eb"})
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.selection.proposal is not None)
        for key, expected in (("i", proposal.proposal_id), ("h", proposal.args_hash),
                              ("a", '{"note": "a\\u202eb"}')):  # fmt: skip
            await pilot.press("y")
            await wait_for(pilot, lambda: isinstance(app.screen, CopyDialog))
            await pilot.press(key)
            await wait_for(pilot, lambda: app.clipboard == expected)  # noqa: B023 - awaited here
            assert app.screen is screen


async def test_a_filter_that_matches_nothing_says_so(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    propose(provider.ledger, "refund_card")
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.selection.proposal is not None)
        notice = screen.query_one("#inbox-empty", Static)
        assert not notice.display
        await pilot.press("slash", *"nosuch")
        await wait_for(pilot, lambda: notice.display)
        assert "No pending proposal matches 'nosuch' (1 pending)" in drawn_text(notice)
        screen.query_one("#inbox-filter", Input).value = "refund"
        await wait_for(pilot, lambda: not notice.display)
