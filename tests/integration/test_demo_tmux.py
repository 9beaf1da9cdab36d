"""End to end in a real terminal: ``supervisor demo`` in tmux, approve with keys, agent resumes.

tmux runs on its own socket (``-L``) with a fixed size; the test reads the screen with
``capture-pane``, presses keys with ``send-keys`` and checks the ledger and the CRM agent's log.
Missing tmux skips locally and fails under ``CI=true`` (tests/support/tmux.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.tmux import Tmux, tmux_server

from supervisor.ledger.models import ProposalStatus
from supervisor.store.provider import SQLModelProvider

pytestmark = pytest.mark.slow


def _kill_demo_processes(home: Path) -> None:
    """SIGKILL every demo agent and browser worker the ledger recorded that is still alive
    (each leads its own process group, Chromium included)."""
    ledger_file = home / "ledger.db"
    if not ledger_file.exists():
        return
    with SQLModelProvider(f"sqlite:///{ledger_file}") as provider:
        pids = [p.pid for p in provider.ledger.list_processes() if p.pid]
    for pid in pids:
        cmdline = Path(f"/proc/{pid}/cmdline")
        with contextlib.suppress(OSError):
            command = cmdline.read_bytes()
            if b"supervisor.demo.agent" in command or b"sandboxes.browser.worker" in command:
                os.killpg(pid, signal.SIGKILL)


def _detail_header(screen: str) -> str:
    """The detail pane's ``tool  [status]`` header, '' when none is shown."""
    for line in screen.splitlines():
        if "[pending]" in line:
            return line.split("\u258f")[-1].strip()
    return ""


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _processes_naming(fragments: list[str]) -> list[int]:
    """Live processes whose command line contains one of ``fragments``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            text = cmdline.read_bytes().decode(errors="replace")
            if any(fragment in text for fragment in fragments):
                found.append(int(cmdline.parent.name))
    return [pid for pid in found if _alive(pid)]


def _worker_rundirs(pids: list[int]) -> list[str]:
    """The run directories of the browser workers among ``pids`` (Chromium's profile is inside)."""
    rundirs = []
    for pid in pids:
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            if "sandboxes.browser.worker" in argv and "--config" in argv:
                rundirs.append(str(Path(argv[argv.index("--config") + 1]).parent))
    return rundirs


def _start_demo(tmux: Tmux, home: Path) -> None:
    tmux.start_supervisor(f"demo --home {home}", width=160)


def _demo_processes(tmux: Tmux, home: Path) -> list[int]:
    """The demo's own pid, then every process its ledger recorded (agents, browser worker)."""
    pane_pid = int(tmux("display-message", "-p", "-t", tmux.session, "#{pane_pid}").strip())
    with SQLModelProvider(f"sqlite:///{home / 'ledger.db'}") as provider:
        return [pane_pid, *(p.pid for p in provider.ledger.list_processes() if p.pid)]


def _survivors_after(pids: list[int], limit: float) -> list[int]:
    """Waits up to ``limit`` seconds for ``pids`` and every Chromium of their browser workers to
    be gone; returns those still alive."""
    rundirs = _worker_rundirs(pids)
    assert rundirs, "the demo's browser worker was not running"
    deadline = time.monotonic() + limit
    while True:
        survivors = [pid for pid in pids if _alive(pid)] + _processes_naming(rundirs)
        if not survivors or time.monotonic() > deadline:
            return survivors
        time.sleep(0.2)


def _header_other_than(previous: str) -> Callable[[str], bool]:
    """A predicate: the detail pane shows a proposal other than ``previous``."""
    return lambda screen: _detail_header(screen) not in ("", previous)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    try:
        with tmux_server(
            "supervisor-e2e", session="demo", shown_while_open="Agent Supervisor"
        ) as session:
            yield session
    finally:
        _kill_demo_processes(tmp_path / "demo")


def test_demo_approve_in_tmux_resumes_the_waiting_crm_agent(tmux: Tmux, tmp_path: Path) -> None:
    home = tmp_path / "demo"
    _start_demo(tmux, home)
    tmux.wait_for(lambda screen: "create_customer" in screen, 60, "the create_customer proposal")
    # Other demo agents may be waiting too: walk the inbox one row at a time ("i" focuses it),
    # each Down only after the screen showed the previous one, so no queued key can move the
    # cursor after the CRM proposal is selected. The detail pane must then draw every argument
    # line ("all arguments shown"; a small pane is scrolled with "d", PageDown), and the proposal
    # must have been selected for the settle time before "a" counts.
    tmux.keys("i", "Home")
    header = tmux.wait_for(lambda screen: "[pending]" in screen, 15, "a selected proposal")
    for _ in range(10):
        if "create_customer  [pending]" in header:
            break
        tmux.keys("Down")
        header = tmux.wait_for(_header_other_than(_detail_header(header)), 15, "the next row")
    tmux.wait_for(lambda screen: "create_customer  [pending]" in screen, 15, "the CRM detail")
    for _ in range(20):
        if "all arguments shown" in tmux.screen():
            break
        tmux.keys("d", "PageDown")
        time.sleep(0.3)
    tmux.wait_for(lambda screen: "all arguments shown" in screen, 15, "the rendered arguments")
    time.sleep(1.0)
    tmux.keys("a")
    screen = tmux.wait_for(
        lambda screen: "Approved: create_customer" in screen or "Confirm" in screen,
        15,
        "the approval (or its confirmation)",
    )
    if "Approved: create_customer" not in screen:
        tmux.keys("y")

    with SQLModelProvider(f"sqlite:///{home / 'ledger.db'}") as provider:
        deadline = time.monotonic() + 30
        statuses: list[ProposalStatus] = []
        while time.monotonic() < deadline:
            proposals = provider.ledger.list(status=None, limit=50).items
            statuses = [p.status for p in proposals if p.tool_name == "create_customer"]
            if statuses and statuses[0] is ProposalStatus.EXECUTED:
                break
            time.sleep(0.2)
        assert statuses == [ProposalStatus.EXECUTED], f"{statuses}; screen was:\n{tmux.screen()}"
        crm = next(p for p in proposals if p.tool_name == "create_customer")
        assert crm.approver_context is not None and crm.approver_context.via == "tui"

    log = home / "logs" / "crm.log"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and "approved: Done" not in log.read_text():
        time.sleep(0.2)
    text = log.read_text()
    assert "waiting for a decision" in text
    assert "approved: Done" in text and "cus_" in text

    # Quitting the supervisor ends the demo: every agent, the browser worker and its Chromium.
    pids = _demo_processes(tmux, home)
    tmux.keys("q")
    assert _survivors_after(pids, 30) == []


def test_closing_the_terminal_stops_every_demo_process(tmux: Tmux, tmp_path: Path) -> None:
    """SIGHUP (the terminal window closed) ends the demo like q: nothing it started survives."""
    home = tmp_path / "demo"
    _start_demo(tmux, home)
    tmux.wait_for(lambda screen: "browser.navigate" in screen, 90, "the browser's first action")
    pids = _demo_processes(tmux, home)
    tmux("kill-server")  # tmux sends the pane's process SIGHUP
    assert _survivors_after(pids, 30) == []


_ASKING_TOOLS = ("create_customer", "run_code", "browser.navigate")


def _select_crm(tmux: Tmux) -> None:
    """Walk the inbox (``i`` focuses it) to the pending create_customer proposal, one row per
    screen, and wait until its detail pane has drawn every argument line."""
    for start, step in (("Home", "Down"), ("End", "Up")):
        tmux.keys("i", start)
        header = tmux.wait_for(lambda screen: "[pending]" in screen, 15, "a selected proposal")
        for _ in range(10):
            if "create_customer  [pending]" in header:
                break
            tmux.keys(step)
            try:
                header = tmux.wait_for(_header_other_than(_detail_header(header)), 3, "a row")
            except AssertionError:
                break  # the first or last row: walk from the other end
        if "create_customer  [pending]" in header:
            break
    tmux.wait_for(lambda screen: "create_customer  [pending]" in screen, 15, "the CRM detail")
    for _ in range(20):
        if "all arguments shown" in tmux.screen():
            break
        tmux.keys("d", "PageDown")
        time.sleep(0.3)
    tmux.wait_for(lambda screen: "all arguments shown" in screen, 15, "the rendered arguments")
    time.sleep(1.0)


def test_demo_edit_in_tmux_runs_the_edited_call_in_the_waiting_crm_agent(
    tmux: Tmux, tmp_path: Path
) -> None:
    """``e`` in a real terminal, then ``a`` on the new proposal: the waiting CRM agent runs the
    edited arguments (never the original) and its model reply names the human's change."""
    home = tmp_path / "demo"
    _start_demo(tmux, home)
    # Every demo agent that asks has asked: no other row arrives to move the inbox cursor.
    tmux.wait_for(
        lambda screen: all(tool in screen for tool in _ASKING_TOOLS), 90, "every demo proposal"
    )
    _select_crm(tmux)
    tmux.keys("e")
    tmux.wait_for(lambda screen: "Edit arguments of create_customer" in screen, 15, "the editor")
    for _ in range(12):  # ctrl+k: clear the line, then remove it (4 lines of arguments)
        tmux.keys("C-k")
    tmux.wait_for(lambda screen: "Not valid JSON" in screen, 15, "the emptied editor")
    tmux("send-keys", "-t", tmux.session, "-l",
         '{"email": "ada@lovelace.example", "name": "Ada Lovelace"}')  # fmt: skip
    tmux.wait_for(lambda screen: "ada@lovelace.example" in screen, 15, "the typed edit")
    tmux.keys("C-s")
    tmux.wait_for(lambda screen: "Edit arguments of" not in screen, 15, "the editor closing")

    with SQLModelProvider(f"sqlite:///{home / 'ledger.db'}") as provider:
        deadline = time.monotonic() + 15
        crm: list[Any] = []
        while time.monotonic() < deadline:
            crm = [
                p for p in provider.ledger.list(status=None, limit=50).items
                if p.tool_name == "create_customer"
            ]  # fmt: skip
            if len(crm) == 2:
                break
            time.sleep(0.2)
        statuses = sorted(p.status.value for p in crm)
        assert statuses == ["pending", "superseded"], f"{statuses}; screen:\n{tmux.screen()}"
        original = next(p for p in crm if p.status is ProposalStatus.SUPERSEDED)
        edited = next(p for p in crm if p.status is ProposalStatus.PENDING)
        assert edited.supersedes_id == original.proposal_id
        assert edited.arguments == {"name": "Ada Lovelace", "email": "ada@lovelace.example"}

    # The selection followed the edit to the new proposal; ``a`` approves it.
    tmux.wait_for(
        lambda screen: "create_customer  [pending]" in screen and "supersedes  " in screen
        and "all arguments shown" in screen,
        15,
        "the edited proposal selected and shown in full",
    )  # fmt: skip
    time.sleep(1.0)  # the settle time before a decision key counts
    tmux.keys("a")
    screen = tmux.wait_for(
        lambda screen: "Approved: create_customer" in screen or "Confirm" in screen,
        15,
        "the approval (or its confirmation)",
    )
    if "Approved: create_customer" not in screen:
        tmux.keys("y")

    log = home / "logs" / "crm.log"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "Done as edited by a human" not in log.read_text():
        time.sleep(0.2)
    text = log.read_text()
    assert f"edited by a human: {original.proposal_id} -> {edited.proposal_id}" in text, text
    assert "approved: Done as edited by a human ($.email: 'ada@example.com' -> " in text, text
    with SQLModelProvider(f"sqlite:///{home / 'ledger.db'}") as provider:
        assert provider.ledger.get(edited.proposal_id).status is ProposalStatus.EXECUTED
        assert provider.ledger.get(original.proposal_id).status is ProposalStatus.SUPERSEDED
        assert provider.ledger.execution(original.proposal_id) is None
        execution = provider.ledger.execution(edited.proposal_id)
        assert execution is not None and execution.state == "executed"
