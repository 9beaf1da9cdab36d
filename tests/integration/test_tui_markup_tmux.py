"""In a real terminal: ``supervisor --db LEDGER`` on a ledger whose process rows hold markup and
terminal escapes draws them as text and keeps running.

A sandbox command containing ``[/]`` used to kill the TUI on every start while its row existed.
tmux runs on its own socket with a fixed size; ``capture-pane`` reads the screen and
``#{pane_title}`` shows whether an OSC sequence from the ledger reached the terminal.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.tmux import Tmux, tmux_server

from supervisor.ledger.models import ProcessRecord
from supervisor.store.provider import SQLModelProvider

pytestmark = pytest.mark.slow

COMMANDS = {
    "crash": "sandbox exec -- echo [/] done",
    "style": "sandbox exec -- echo [bold]loud[/bold] [link=https://evil]click[/link]",
    "title": "sandbox exec -- printf \x1b]2;pwned\x07 [@click=app.quit]x[/]",
}


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    with tmux_server(
        "supervisor-markup", session="tui", shown_while_open="Approval inbox"
    ) as session:
        yield session


def _seed(ledger: Path) -> str:
    url = f"sqlite:///{ledger}"
    now = datetime.now(UTC)
    with SQLModelProvider(url) as provider:
        for name, command in COMMANDS.items():
            provider.ledger.upsert_process(
                ProcessRecord(
                    process_id=name, kind="sandbox_run", pid=os.getpid(),
                    host=socket.gethostname(), command=command, status="running",
                    started_at=now, heartbeat_at=now,
                )
            )  # fmt: skip
    return url


def test_markup_in_process_commands_is_shown_literally_in_a_real_terminal(
    tmux: Tmux, tmp_path: Path
) -> None:
    url = _seed(tmp_path / "ledger.db")
    # Wide enough for the longest command whole beside the detail pane.
    tmux.start_supervisor(f"--db {url}", width=220)
    # remain-on-exit keeps a crashed app's pane (and its exit status) readable.
    tmux("set-option", "-t", tmux.session, "remain-on-exit", "on")
    shown = (
        "echo [/] done",
        "echo [bold]loud[/bold] [link=https://evil]click[/link]",
        "printf \\u001b]2;pwned\\u0007 [@click=app.quit]x[/]",
    )
    screen = tmux.wait_for(
        lambda screen: "Approval inbox" in screen and all(text in screen for text in shown),
        60,
        "the process rows drawn literally",
    )
    assert "echo [bold]loud[/bold] [link=https://evil]click[/link]" in screen
    assert "printf \\u001b]2;pwned\\u0007 [@click=app.quit]x[/]" in screen
    time.sleep(3.0)  # the processes pane refreshes every poll: the rows are drawn again
    screen = tmux.screen()
    assert "Approval inbox" in screen and "echo [/] done" in screen, screen
    dead = tmux("display-message", "-p", "-t", tmux.session, "#{pane_dead}").strip()
    assert dead == "0", screen
    title = tmux("display-message", "-p", "-t", tmux.session, "#{pane_title}").strip()
    assert "pwned" not in title
