"""Pilot tests of grants in the TUI on a real SQLite ledger: ``g`` (approve and allow similar)
makes a grant that decides the next similar call, batch by template approves exactly the
listed proposals, ``G`` lists and revokes grants, and hostile argument text stays text."""

from __future__ import annotations

from textual.widgets import Checkbox, DataTable, Input, Select, Static
from tui_helpers import (
    assert_drawn_literally,
    drawn_text,
    expect_drawn,
    main_screen,
    propose,
    record_notifications,
    wait_for,
)

from screens.app import make_app
from screens.confirm_dialog import ConfirmDialog
from screens.grant_dialog import GrantDialog
from screens.grants_screen import GrantsScreen
from supervisor.ledger.models import ProposalStatus
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (160, 50)


def _write(provider: SQLModelProvider, path: str, **options: object) -> str:
    proposal = propose(provider.ledger, "write_file", arguments={"path": path, "mode": "w"},
                       **options)  # fmt: skip
    return proposal.proposal_id


async def test_g_grants_similar_calls_and_the_next_one_is_approved_by_the_grant(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    source = _write(provider, "/srv/app/logs/a.txt")
    app = make_app(settings, ledger=ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, GrantDialog))
        dialog = app.screen
        assert isinstance(dialog, GrantDialog) and dialog.names == ["mode", "path"]
        assert dialog.query_one("#grant-minutes", Input).value == "15"
        assert dialog.query_one("#grant-uses", Input).value == "20"
        assert dialog.query_one("#grant-any-agent", Checkbox).value is False
        dialog.query_one("#grant-kind-1", Select).value = "prefix"
        value = dialog.query_one("#grant-value-1", Input)
        await wait_for(pilot, lambda: value.value == "/srv/app/logs/")
        await pilot.press("enter")  # Enter never confirms
        await pilot.pause(0.1)
        assert app.screen is dialog
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: len(ledger.grants()) == 1)
        (grant,) = ledger.grants()
        assert grant.arguments == {"mode": {"exact": "w"}, "path": {"prefix": "/srv/app/logs/"}}
        assert grant.max_uses == 20 and grant.owner == "crm-agent"
        assert (grant.expires_at - grant.created_at).total_seconds() == 900
        assert grant.approver_id == identity.approver_id
        approved = ledger.get(source)
        assert approved.status is ProposalStatus.APPROVED
        assert approved.approver_id == identity.approver_id
        await wait_for(pilot, lambda: any("Approved and granted" in note for note in notes))
    similar = propose(ledger, "write_file", arguments={"path": "/srv/app/logs/b.txt", "mode": "w"})
    assert similar.status is ProposalStatus.APPROVED
    assert similar.decided_by_rule == f"grant:{grant.grant_id}"
    other = propose(ledger, "write_file", arguments={"path": "/srv/app/x.txt", "mode": "w"})
    assert other.status is ProposalStatus.PENDING


async def test_a_never_grantable_tool_is_refused_and_nothing_changes(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    secret = propose(provider.ledger, "read_secret", arguments={"name": "db"}, grantable=False)
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("g")
        await wait_for(pilot, lambda: any("never-grantable" in note for note in notes))
        await app.workers.wait_for_complete()
        assert app.screen is screen  # no dialog opened
    assert provider.ledger.get(secret.proposal_id).status is ProposalStatus.PENDING
    assert provider.ledger.grants() == []


async def test_batch_by_template_approves_exactly_the_listed_proposals(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    source = _write(provider, "/srv/app/a.txt")
    twin = _write(provider, "/srv/app/b.txt")
    other_agent = _write(provider, "/srv/app/c.txt", owner="ops-agent")
    raced = _write(provider, "/srv/app/d.txt")
    outside = _write(provider, "/etc/passwd")
    app = make_app(settings, ledger=ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(
            pilot, lambda: screen.guard is not None and len(screen.approvals.pending()) == 5
        )
        assert screen.selected is not None and screen.selected.proposal_id == source
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, GrantDialog))
        dialog = app.screen
        assert isinstance(dialog, GrantDialog)
        matches = dialog.query_one("#grant-matches", Static)
        assert "No other pending proposal matches" in drawn_text(matches)
        dialog.query_one("#grant-kind-1", Select).value = "prefix"
        await wait_for(pilot, lambda: {p.proposal_id for p in dialog.matched} == {twin, raced})
        dialog.query_one("#grant-any-agent", Checkbox).value = True
        listed = {twin, raced, other_agent}
        await wait_for(pilot, lambda: {p.proposal_id for p in dialog.matched} == listed)
        await expect_drawn(pilot, matches, ["3 other pending proposals match:", twin[:12]])
        also = dialog.query_one("#grant-also", Checkbox)
        assert not also.disabled and "3 listed" in str(also.label)
        also.value = True
        # Someone else decides one of the listed proposals before the operator confirms.
        ledger.reject(raced, "bob@elsewhere", "not this one")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: ledger.get(twin).status is ProposalStatus.APPROVED)
        await wait_for(pilot, lambda: any("Approved and granted" in note for note in notes))
    statuses = {pid: ledger.get(pid).status for pid in (source, twin, other_agent, raced, outside)}
    assert statuses == {
        source: ProposalStatus.APPROVED, twin: ProposalStatus.APPROVED,
        other_agent: ProposalStatus.APPROVED, raced: ProposalStatus.REJECTED,
        outside: ProposalStatus.PENDING,
    }  # fmt: skip
    note = next(note for note in notes if "Approved and granted" in note)
    assert "also approved 2" in note and "no longer matches" in note
    (grant,) = ledger.grants()
    assert grant.owner == "" and grant.uses == 0  # approving the listed ones is not a use


async def test_grants_view_lists_follows_the_feed_and_revokes(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity,
    sqlite_url: str,
) -> None:  # fmt: skip
    ledger = provider.ledger
    first = _write(provider, "/srv/app/a.txt")
    _, grant = ledger.approve_similar(
        first, "alice", patterns={"path": {"prefix": "/srv/app/"}}, max_uses=3
    )
    app = make_app(settings, ledger=ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.press("G")
        await wait_for(pilot, lambda: isinstance(app.screen, GrantsScreen))
        view = app.screen
        assert isinstance(view, GrantsScreen)
        table = view.query_one("#grants-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 1)
        await expect_drawn(
            pilot, table, [grant.grant_id[:12], "active", "write_file", "crm-agent",
                           'path=prefix:"/srv/app/"', "0/3", "alice"],
        )  # fmt: skip
        # A call the grant allows, recorded by another process, shows as a use.
        with SQLModelProvider(sqlite_url) as other:
            used = propose(other.ledger, "write_file",
                           arguments={"path": "/srv/app/b.txt", "mode": "w"})  # fmt: skip
            assert used.decided_by_rule == f"grant:{grant.grant_id}"
            second = _write(other, "/srv/data/x.csv")
            other.ledger.approve_similar(second, "bob", patterns={"path": {"prefix": "/srv/"}},
                                         any_agent=True)  # fmt: skip
        await expect_drawn(pilot, table, ["1/3", "any agent", "bob"])
        assert table.row_count == 2
        table.move_cursor(row=1)  # newest first: alice's grant is the second row
        await wait_for(pilot, lambda: view.selected_id == grant.grant_id)
        await pilot.pause(0.1)
        assert view.selected_id == grant.grant_id
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await app.workers.wait_for_complete()
        assert ledger.grant(grant.grant_id).revoked_at is not None, notes
        assert ledger.grant(grant.grant_id).revoked_by == identity.approver_id
        await wait_for(pilot, lambda: table.row_count == 1)  # live grants only
        await wait_for(pilot, lambda: any("revoked" in note for note in notes))
        await pilot.press("a")
        await wait_for(pilot, lambda: table.row_count == 2)
        await expect_drawn(pilot, table, ["revoked"])
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
    after = propose(ledger, "write_file", arguments={"path": "/srv/app/c.txt", "mode": "w"})
    assert after.decided_by_rule != f"grant:{grant.grant_id}"


HOSTILE_PATH = "/srv/\x1b[2J[bold]/[@click=app.quit]x.txt"


async def test_hostile_argument_text_is_shown_literally_in_the_dialog_and_the_grants_view(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    source = propose(ledger, "write_file", arguments={"path": HOSTILE_PATH, "note": "[red]x[/red]"})
    app = make_app(settings, ledger=ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, GrantDialog))
        dialog = app.screen
        assert isinstance(dialog, GrantDialog) and dialog.names == ["note", "path"]
        dialog.query_one("#grant-kind-1", Select).value = "prefix"
        field = dialog.query_one("#grant-value-1", Input)
        await wait_for(pilot, lambda: field.value == "/srv/\\u001b[2J[bold]/")
        await pilot.pause(0.1)
        note, path = dialog.query(".grant-arg")
        assert_drawn_literally(note, ['note = "[red]x[/red]"'])
        assert_drawn_literally(path, [f'path = "{HOSTILE_PATH}"'])
        assert_drawn_literally(field, ["/srv/\x1b[2J[bold]/"])
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: len(ledger.grants()) == 1)
        (grant,) = ledger.grants()
        assert grant.arguments["path"] == {
            "prefix": "/srv/\x1b[2J[bold]/"
        }  # the raw value, unescaped
        assert ledger.get(source.proposal_id).status is ProposalStatus.APPROVED
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("G")
        await wait_for(pilot, lambda: isinstance(app.screen, GrantsScreen))
        table = app.screen.query_one("#grants-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 1)
        await expect_drawn(pilot, table, ['note=exact:"[red]x[/red]"', "/srv/\x1b[2J[bold]/"])
