"""In a real terminal: a run blocked on the operator is announced exactly once (the bell, OSC 9
and OSC 777 in the bytes the TUI writes, and one ``notify-send`` from a stub on PATH); a call a
rule allows is never announced, nor one pending before the console started, nor a proposal that
merely changed (extended). Hostile tool names reach every channel escaped.

tmux runs on its own socket; ``pipe-pane -O`` records what the TUI writes to its terminal.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_cli
from support.tmux import Tmux, tmux_server

from supervisor.ledger.models import ProposalStatus
from supervisor.store.provider import SQLModelProvider

pytestmark = pytest.mark.slow
SCHEMA = "6" * 64
POLICY = """
[[rules]]
name = "status reads"
tool = "read_status"
verdict = "allow"
reason = "reading status changes nothing"
"""
HOSTILE = "wipe\u202edisk\x1b]0;pwned\x07"


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    with tmux_server("supervisor-notify", session="tui", shown_while_open="Agent Supervisor") as s:
        yield s


def _stub_notify_send(folder: Path) -> Path:
    """A ``notify-send`` that writes its arguments, one per line, to a file of its own.

    The console runs each desktop notice in its own thread, so two calls can overlap: one shared
    file would interleave their lines.
    """
    calls = folder / "notify-send.calls"
    calls.mkdir()
    stub = folder / "bin" / "notify-send"
    stub.parent.mkdir()
    stub.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$(mktemp '{calls}/call.XXXXXX')\"\n")
    stub.chmod(0o755)
    return calls


def _propose(url: str, tool: str, ttl: float = 3600) -> str:
    with SQLModelProvider(url) as provider:
        return provider.ledger.propose(
            tool, SCHEMA, {"target": "db-1"}, owner="ops-agent", ttl_seconds=ttl
        ).proposal_id


def _desktop_calls(calls: Path) -> list[str]:
    return [call.read_text() for call in sorted(calls.iterdir()) if call.read_text().strip()]


def test_each_blocked_proposal_is_announced_once_on_every_channel(
    tmux: Tmux, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with SQLModelProvider(url) as provider:
        provider.ledger.head()
    (tmp_path / "policy.toml").write_text(POLICY)
    applied = run_cli("policy", "apply", str(tmp_path / "policy.toml"), "--reason", "t",
                      "--db", url)  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    before = _propose(url, "restart_service")  # pending before the console starts
    calls = _stub_notify_send(tmp_path)
    raw = tmp_path / "terminal.raw"
    path = f"{tmp_path / 'bin'}:/usr/bin:/bin"
    tmux.start_supervisor(f"--db {url}", width=160, env={"PATH": path}, raw_output=raw)
    tmux.wait_for(lambda s: "restart_service" in s, 60, "the TUI with the earlier proposal")
    time.sleep(1.0)

    blocked = [_propose(url, "write_file"), _propose(url, HOSTILE)]
    allowed = _propose(url, "read_status")
    with SQLModelProvider(url) as provider:
        assert provider.ledger.get(allowed).status is ProposalStatus.APPROVED
    tmux.wait_for(lambda s: "write_file" in s and "wipe" in s, 30, "both blocked proposals")
    deadline = time.monotonic() + 20
    while len(_desktop_calls(calls)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    with SQLModelProvider(url) as provider:  # a change to a pending proposal is no new block
        provider.ledger.extend(blocked[0], 600, "ops@example.com", reason="more time")
    time.sleep(4.0)  # a few refresh rounds: nothing more may arrive

    written = raw.read_bytes().decode("utf-8", "replace")
    osc9 = written.count("\x1b]9;Agent Supervisor: Approval needed: ")
    osc777 = written.count("\x1b]777;notify;Approval needed: ")
    assert (osc9, osc777) == (2, 2), written[-3000:]
    wrapped = written.count("\x1bPtmux;\x1b\x1b]9;Agent Supervisor: Approval needed: ")
    assert wrapped == 2, "inside tmux, wrapped for its passthrough to the outer terminal"
    assert "Approval needed: write_file" in written
    assert "Approval needed: wipe\\u202edisk\\u001b]0\\u003bpwned\\u0007" in written
    assert "\u202e" not in written and "\x1b]0;pwned" not in written
    for absent in ("read_status", "restart_service"):
        assert f"Approval needed: {absent}" not in written
    desktop = _desktop_calls(calls)
    assert len(desktop) == 2, desktop
    titles = sorted(block.splitlines()[-2] for block in desktop)
    assert titles == sorted(["Approval needed: write_file",
                             "Approval needed: wipe\\u202edisk\\u001b]0;pwned\\u0007"])  # fmt: skip
    assert all("--app-name=Agent Supervisor" in block for block in desktop)
    assert "ops-agent is waiting for you (expires in 60 min)" in desktop[0]
    # No notice names the earlier proposal (its id is on screen, in the inbox and the detail).
    notices = re.findall(r"\x1b\](?:9|777);[^\x07]*\x07", written)
    assert len(notices) == 4 and not any(before in notice for notice in notices), notices
    assert not any(before in block for block in desktop)
