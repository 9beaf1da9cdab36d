"""In a real 100x30 terminal: ``?`` lists the keys, ``:processes`` hands the keyboard to the
processes pane, ``y i`` copies the selected proposal's id (the OSC 52 sequence is read from the
bytes the TUI writes) and the CLI approves that proposal by a short prefix of it; every pane is
reachable and no id, state or pid is cut.

tmux runs on its own socket with a fixed size; ``pipe-pane -O`` records what the TUI writes.
"""

from __future__ import annotations

import base64
import os
import re
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.cli import run_cli
from support.tmux import Tmux, tmux_server

from supervisor.ledger.models import ProcessRecord, ProposalStatus
from supervisor.store.provider import SQLModelProvider

pytestmark = pytest.mark.slow
SCHEMA = "7" * 64
PROCESSES = {
    "sandbox-run-one": ("sandbox_run", "sandbox exec -- python -c 'import time; time.sleep(600)'"),
    "browser-worker-1": ("browser_worker", "browser-use worker --task 'compare the flight prices'"),
}
TOOLS = ("refund_card_payment_with_a_long_name", "send_email_to_the_whole_company", "drop_table")
OSC52 = re.compile(rb"\x1b\]52;c;([A-Za-z0-9+/=]*)(?:\x07|\x1b\\)")


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    with tmux_server("supervisor-console", session="tui", shown_while_open="Agent Supervisor") as s:
        yield s


def _seed(url: str) -> list[str]:
    now = datetime.now(UTC)
    with SQLModelProvider(url) as provider:
        ledger = provider.ledger
        for process_id, (kind, command) in PROCESSES.items():
            ledger.upsert_process(
                ProcessRecord(
                    process_id=process_id, kind=kind, pid=os.getpid(), host=socket.gethostname(),
                    command=command, status="running", started_at=now, heartbeat_at=now,
                )
            )  # fmt: skip
        return [
            ledger.propose(
                tool, SCHEMA, {"order": f"A-{number}", "amount": 10 * number},
                owner="billing-agent-production", thread_id="thread-0042",
                domains=["payments.example.com"], ttl_seconds=3600, risk="high",
            ).proposal_id
            for number, tool in enumerate(TOOLS)
        ]  # fmt: skip


def _copied(raw: Path) -> list[str]:
    data = raw.read_bytes() if raw.exists() else b""
    return [base64.b64decode(found).decode() for found in OSC52.findall(data)]


def test_keys_copy_prefix_and_a_100x30_layout_in_a_real_terminal(
    tmux: Tmux, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ids = _seed(url)
    raw = tmp_path / "terminal.bytes"
    tmux.start_supervisor(f"--db {url}", width=100, height=30, raw_output=raw)

    # At 100x30 the lists take the whole width: every pid, state and inbox id is whole.
    pid = str(os.getpid())
    screen = tmux.wait_for(
        lambda s: (
            all(i[:8] in s for i in ids)
            and s.count(pid) >= len(PROCESSES)
            and "waiting for approval" in s
        ),
        60,
        "the inbox ids, the process rows and the waiting agent",
    )
    process_rows = [line for line in screen.splitlines() if line.strip().startswith(pid)]
    assert len(process_rows) == len(PROCESSES), screen
    assert all(" running " in row for row in process_rows), screen
    waiting = [line for line in screen.splitlines() if "waiting for approval" in line]
    assert waiting and "billing-agent-produc" in waiting[0], screen  # the agent row, state whole
    assert "Live trace" in screen and "Approval inbox" in screen, screen
    assert "expires" in screen and "risk" in screen, screen  # no inbox column cut off

    # ? lists every key of the screen; escape closes it.
    tmux.keys("?")
    shown = tmux.wait_for(lambda s: "Keys of this screen" in s, 10, "the help screen")
    assert "Approve" in shown and "Copy" in shown, shown
    tmux.keys("Escape")
    tmux.wait_for(lambda s: "Keys of this screen" not in s, 10, "the help closing")

    # d brings the detail (the full id); escape goes back to the lists.
    tmux.keys("d")
    detail = tmux.wait_for(lambda s: f"id          {ids[0]}" in s, 10, "the detail's full id")
    assert "Approval inbox" not in detail, detail  # the detail has the whole width
    tmux.keys("Escape")
    tmux.wait_for(lambda s: "Approval inbox" in s, 10, "the lists back")

    # :processes (completed with Tab) hands the keyboard to the processes pane.
    on_top = tmux.wait_for(
        lambda s: any(f"{name}  pid {pid}" in s for name in PROCESSES), 10, "a process detail line"
    )
    first = next(name for name in PROCESSES if f"{name}  pid {pid}" in on_top)
    second = next(name for name in PROCESSES if name != first)
    tmux.keys(":")
    tmux.wait_for(lambda s: "(Tab completes)" in s, 10, "the command bar")
    tmux.keys("p", "r", "o", "c", "Tab")
    tmux.wait_for(lambda s: "▊  processes " in s, 10, "the completed command")
    tmux.keys("Enter")
    tmux.wait_for(lambda s: "Tab complete" not in s, 10, "the command bar closing")
    tmux.keys("Down")
    tmux.wait_for(lambda s: f"{second}  pid {pid}" in s, 10, "the second process selected")

    # i: back to the inbox; Down selects the second proposal; y i copies its id (OSC 52).
    tmux.keys("i", "Down")
    tmux.wait_for(lambda s: "Approval inbox" in s, 10, "the inbox")
    tmux.keys("y")
    tmux.wait_for(lambda s: "Copy to the clipboard" in s, 10, "the copy dialog")
    tmux.keys("i")
    tmux.wait_for(lambda s: "Copy to the clipboard" not in s, 10, "the copy dialog closing")
    tmux.wait_for(lambda _: bool(_copied(raw)), 10, "the OSC 52 sequence")
    with SQLModelProvider(url) as provider:  # the inbox order: oldest first, ties by id
        order = sorted(ids, key=lambda i: (provider.ledger.get(i).created_at, i))
    chosen = order[1]
    assert _copied(raw) == [chosen]

    # A six-character prefix of the copied id approves that proposal, and only that one.
    prefix = _copied(raw)[0][:6]
    done = run_cli("proposals", "approve", prefix, "--db", url, "--approver", "ops")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"approved {chosen} by ops"), done.stdout
    with SQLModelProvider(url) as provider:
        statuses = {found: provider.ledger.get(found).status for found in ids}
    assert statuses == {
        found: ProposalStatus.APPROVED if found == chosen else ProposalStatus.PENDING
        for found in ids
    }
    # The console sees the decision made elsewhere: the row leaves the inbox.
    tmux.wait_for(
        lambda s: chosen[:8] not in s and order[0][:8] in s and order[2][:8] in s,
        20,
        "the approved proposal leaving the inbox",
    )

    # "Down a" typed faster than the selection follows never decides the row just left (its
    # arguments were shown and it has settled, so without the check it would be approved).
    first_left = order[0]
    tmux.keys("Home")
    tmux.keys("d")
    tmux.wait_for(lambda s: f"id          {first_left}" in s, 10, "the first row's detail")
    tmux.keys("Escape")
    tmux.wait_for(lambda s: "Approval inbox" in s, 10, "the lists back")
    time.sleep(1.5)  # past the settle time
    tmux.keys("Down", "a")
    refused = tmux.wait_for(
        lambda s: "Selection just changed" in s or "Arguments not fully shown" in s,
        10,
        "the decision refused",
    )
    time.sleep(1.0)
    with SQLModelProvider(url) as provider:
        after = {found: provider.ledger.get(found).status for found in ids}
    assert after == statuses, refused

    # The same for "Down r": the reject dialog never names the row just left.
    with SQLModelProvider(url) as provider:
        left_tool = provider.ledger.get(first_left).tool_name
    # A refusal for arguments not shown brings the detail forward (at 100 columns it hides the
    # lists): back to the inbox first, as the operator would, so Home moves its cursor.
    tmux.keys("i")
    tmux.wait_for(lambda s: "Approval inbox" in s, 10, "the inbox after the refusal")
    tmux.keys("Home")
    tmux.keys("d")
    tmux.wait_for(lambda s: f"id          {first_left}" in s, 10, "the first row's detail again")
    tmux.keys("Escape")
    tmux.wait_for(lambda s: "Approval inbox" in s, 10, "the lists back again")
    # The earlier refusal's toast is gone, so what is seen next answers this key.
    tmux.wait_for(lambda s: "Selection just changed" not in s, 20, "the earlier toast gone")
    time.sleep(1.5)
    tmux.keys("Down", "r")
    shown = tmux.wait_for(
        lambda s: "Selection just changed" in s or ": why?" in s, 10, "a refusal or the dialog"
    )
    assert f"Reject {left_tool}" not in shown, shown
