"""Text from the ledger is data: every pane, toast and dialog draws it literally and escaped.

Each test seeds a real SQLite ledger with markup (``[/]`` crashes a parser, ``[bold]``,
``[link=...]`` and ``[@click=...]`` restyle, link or bind actions), terminal escapes and a bidi
override in the fields an agent, tool, web page or other process controls, then reads what the
widgets actually draw: the app keeps running and the text is there, character for character.
"""

from __future__ import annotations

import json
import socket
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from textual.widgets import Static, TextArea
from tui_helpers import (
    FIXED_NOW,
    HOSTILE,
    drawn_text,
    expect_drawn,
    main_screen,
    propose,
    toast_text,
    wait_for,
)

from screens.app import make_app
from screens.confirm_dialog import ConfirmDialog
from screens.edit_arguments_screen import EditArgumentsScreen
from screens.log_screen import LogScreen
from screens.main_screen import MainScreen
from screens.reason_dialog import ReasonDialog
from screens.widgets.detail.detail_pane import DetailPane
from screens.widgets.inbox.inbox_list import InboxList
from screens.widgets.processes.processes_pane import ProcessesPane
from screens.widgets.trace.trace_view import TraceView
from supervisor.ledger.models import ProcessRecord, TraceEvent
from supervisor.services.identity import ApproverIdentity
from supervisor.services.rendering import visible_escapes
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (240, 60)


async def test_process_commands_and_agent_ids_with_markup_are_drawn_literally(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    now = datetime.now(UTC)
    for number, command in enumerate(HOSTILE):
        provider.ledger.upsert_process(
            ProcessRecord(
                process_id=f"p{number}", kind="sandbox_run", pid=1000 + number,
                host=socket.gethostname(), command=f"sh -c {command}", status="running",
                started_at=now, heartbeat_at=now,
            )
        )  # fmt: skip
    provider.ledger.upsert_process(
        ProcessRecord(
            process_id="odd", kind="[bold]kind[/bold]", host="[/]host", command="odd",
            status="[link=https://evil]up[/link]", started_at=now, heartbeat_at=now,
        )
    )  # fmt: skip
    provider.ledger.append_trace(
        TraceEvent(at=now, agent_id=f"agent {text}", kind="tool_call", tool="noop")
        for text in HOSTILE
    )
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        pane = app.screen.query_one(ProcessesPane)
        await wait_for(pilot, lambda: pane.row_count == 2 * len(HOSTILE) + 1)
        pane.styles.height = pane.row_count + 1  # every row on screen at once
        await pilot.pause(0.2)  # a few refreshes of the pane on the running app
        assert app.is_running
        expected = [
            *(f"sh -c {text}" for text in HOSTILE),
            *(f"agent {text}" for text in HOSTILE),
            "[bold]kind[/bold]",
            "[/]host",
            "[link=https://evil]up[/link]",
        ]
        await expect_drawn(pilot, pane, expected)
        for row in range(pane.row_count):
            for cell in pane.get_row_at(row):
                assert not cell.spans, cell  # no style came from the data


async def test_inbox_detail_and_history_show_names_reasons_and_ids_literally(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    decided = propose(
        provider.ledger, "[bold]rm[/bold]", owner="[/]agent", thread_id="[link=https://evil]t",
        policy_reason="[@click=app.quit]x[/]", domains=["[/]d"], arguments={"n": 1},
    )  # fmt: skip
    provider.ledger.reject(decided.proposal_id, "\x1b]0;x\x07[/]b", "[b]no[/b]\n#9 ok")
    for text in HOSTILE:
        propose(provider.ledger, f"tool{text}", owner=f"o{text}", thread_id=f"t{text}")
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = main_screen(app)
        inbox = screen.query_one(InboxList)
        await wait_for(pilot, lambda: inbox.row_count == len(HOSTILE))
        await pilot.pause(0.2)
        assert app.is_running
        text = drawn_text(inbox)
        for value in HOSTILE:  # the columns clip long values; the start of each is there
            assert visible_escapes(f"tool{value}")[:22] in text, text
        await expect_drawn(pilot, inbox, ["tool[/]", "o[/]", "t[/]", "tool[bold]x[/bold]"])
        # The decided proposal with its history, shown in the detail pane.
        screen._select(provider.ledger.get(decided.proposal_id))
        detail = screen.query_one(DetailPane)
        await wait_for(pilot, lambda: bool(detail.history))
        await pilot.pause(0.1)
        header = detail.query_one("#detail-header", Static)
        fields = detail.query_one("#detail-fields", Static)
        history = detail.query_one("#detail-history", Static)
        await expect_drawn(pilot, header, ["[bold]rm[/bold]  [rejected]"])
        await expect_drawn(
            pilot,
            fields,
            ["[@click=app.quit]x[/]", "owner       [/]agent", "[link=https://evil]t", "[/]d"],
        )
        # A line break in the reason is shown as an escape: it cannot draw a fake record.
        await expect_drawn(pilot, history, ["reject   by \x1b]0;x\x07[/]b — [b]no[/b]\n#9 ok"])
        history_text = drawn_text(history)
        assert not any(line.startswith("#9") for line in history_text.splitlines())


async def test_toasts_show_tool_names_agents_and_approvers_literally(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    first = propose(provider.ledger, "watched", owner="agent", arguments={"n": 0})
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        # A new proposal arriving while the TUI runs: "New proposal" toast with its names.
        propose(provider.ledger, "[/]x[link=https://evil]y", owner="[@click=app.quit]z[/]")
        await wait_for(pilot, lambda: "New proposal" in toast_text(app))
        # Another approver won the race: the conflict toast names them.
        screen.approvals.stop()  # this supervisor has not seen the decision yet
        provider.ledger.approve(first.proposal_id, "[bold]bob[/bold]\x1b[2J", via="cli")
        await pilot.press("a")
        await wait_for(pilot, lambda: "approve failed" in toast_text(app))
        await pilot.pause(0.1)
        assert app.is_running
        for toast in app.screen.query("Toast"):
            await expect_drawn(pilot, toast, [])
        toasts = toast_text(app)
        assert "[/]x[link=https://evil]y from [@click=app.quit]z[/]" in toasts, toasts
        assert visible_escapes("Already approved by [bold]bob[/bold]\x1b[2J at") in toasts, toasts


async def test_dialogs_show_the_tool_name_literally(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    propose(
        provider.ledger, "[/]pay\u202egnp[bold]", domains=["payments"],
        arguments={"to": "pay\u202egnp.exe [link=https://evil]x[/link]"},
    )  # fmt: skip
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = main_screen(app)
        await wait_for(pilot, lambda: screen.guard is not None)
        await pilot.press("a")  # high-risk domain: a second confirmation
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        question = app.screen.query_one(".dialog-question", Static)
        await expect_drawn(pilot, question, ["[/]pay\u202egnp[bold] touches high-risk domains"])
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonDialog))
        title = app.screen.query_one(".dialog-question", Static)
        await expect_drawn(pilot, title, ["Reject [/]pay\u202egnp[bold]: why?"])
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, EditArgumentsScreen))
        editor = app.screen
        assert isinstance(editor, EditArgumentsScreen)
        await expect_drawn(
            pilot,
            editor.query_one(".dialog-question", Static),
            ["Edit arguments of [/]pay\u202egnp"],
        )
        # The editor shows the bidi override as a JSON escape; it parses back unchanged.
        text = editor.query_one("#edit-text", TextArea).text
        assert "\u202e" not in text and "pay\\u202egnp.exe [link=https://evil]x[/link]" in text
        assert editor._parse() == {"to": "pay\u202egnp.exe [link=https://evil]x[/link]"}
        assert app.is_running


async def test_trace_pane_and_event_detail_show_agent_tool_and_reason_literally(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    provider.ledger.append_trace(
        [
            TraceEvent(
                at=FIXED_NOW + timedelta(seconds=index), agent_id=f"a{text}", thread_id=f"t{text}",
                run_id=f"r{text}", kind="tool_result", tool=f"k{text}", outcome_status="error",
                reason_code=f"c{text}", payload={"message": f"m{text}"},
            )
            for index, text in enumerate(HOSTILE)
        ]
    )  # fmt: skip
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        trace = app.screen.query_one(TraceView)
        await wait_for(pilot, lambda: len(trace.events) == len(HOSTILE))
        await pilot.pause(0.1)
        await expect_drawn(pilot, trace, ["a[/]", "k[bold]x[/bold]", "c[/]", "c[bold]x[/bold]"])
        text = drawn_text(trace)
        assert visible_escapes("a\x1b[2J\x1b]0;pwned\x07")[:14] in text, text
        await pilot.press("t", "up")  # the last event: the bidi override
        detail = app.screen.query_one(DetailPane)
        await wait_for(pilot, lambda: detail.event is not None)
        await pilot.pause(0.1)
        await expect_drawn(pilot, detail.query_one("#detail-header", Static), ["kpay\u202egnp.exe"])
        await expect_drawn(
            pilot,
            detail.query_one("#detail-fields", Static),
            ["apay\u202egnp.exe", "tpay\u202egnp.exe", "rpay\u202egnp.exe", "cpay\u202egnp.exe"],
        )
        for _ in HOSTILE[:-1]:
            await pilot.press("up")
        await wait_for(pilot, lambda: detail.event is not None and detail.event.tool == "k[/]")
        await pilot.pause(0.1)
        await expect_drawn(pilot, detail.query_one("#detail-fields", Static), ["a[/]", "c[/]"])
        assert app.is_running


async def test_log_viewer_escapes_a_runs_output_and_names(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity,
    tmp_path: Path,
) -> None:  # fmt: skip
    log = tmp_path / "run.log"
    log.write_text("ok [/] [bold]x[/bold]\n\x1b[2J\x1b]0;pwned\x07cleared\r\npay\u202egnp.exe\n")
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        await app.push_screen(LogScreen("[/]run[bold]", log))
        screen = app.screen
        assert isinstance(screen, LogScreen)
        await wait_for(pilot, lambda: "pay" in screen.text)
        await pilot.pause(0.1)
        assert screen.text.splitlines() == [
            "ok [/] [bold]x[/bold]",
            "\\u001b[2J\\u001b]0;pwned\\u0007cleared",
            "pay\\u202egnp.exe",
        ]
        await expect_drawn(pilot, screen.query_one("#title-bar", Static), ["Run [/]run[bold]"])
        await expect_drawn(pilot, screen.query_one("#run-log"), ["\x1b[2J\x1b]0;pwned\x07cleared"])
        assert app.is_running


async def test_a_forged_audit_payload_in_the_history_is_shown_not_fatal(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity,
    tmp_path: Path,
) -> None:  # fmt: skip
    """Any process that can write the ledger file can put any JSON in an audit payload."""
    proposal = propose(provider.ledger, "watched", arguments={"n": 1})
    with sqlite3.connect(tmp_path / "ledger.db") as connection:
        connection.execute(
            "UPDATE audit SET payload_json = ? WHERE subject = ?",
            (json.dumps({"reason": ["[/]"], "diff": [7, "[/]", {"op": "[bold]", "new": {}}]}),
             proposal.proposal_id),
        )  # fmt: skip
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        detail = app.screen.query_one(DetailPane)
        await wait_for(pilot, lambda: bool(detail.history))
        history = detail.query_one("#detail-history", Static)
        await expect_drawn(
            pilot, history, ["propose  by crm-agent — ['[/]']", "    7", '    "[/]"']
        )
        await expect_drawn(pilot, history, ["    [bold] None: null → {}"])
        assert app.is_running
