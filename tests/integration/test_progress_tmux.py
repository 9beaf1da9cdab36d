"""In a real terminal, the processes pane shows what each process is doing as it goes: a
browser worker's step N of max with its URL (real Chromium through browser-use) and a 10 s
sandbox run's elapsed time against its limit and the output it has written (real bubblewrap),
both changing from one capture to the next.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.browser_run import Verdict, chromium_or_skip, run_task
from support.browser_site import BrowserPlan, BrowserSite, element_index
from support.cli import SUPERVISOR
from support.tmux import Tmux, tmux_server

from supervisor.ledger.models import Proposal
from supervisor.store.provider import SQLModelProvider

pytestmark = pytest.mark.slow
SANDBOX = "for i in $(seq 10); do echo tick-$i-0123456789012345678901234567890123; sleep 1; done"


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    with tmux_server(
        "supervisor-progress", session="tui", shown_while_open="Agent Supervisor"
    ) as s:
        yield s


def _slow_approve(proposal: Proposal) -> Verdict:
    time.sleep(2.5)  # an operator reading the call: the worker stays on its step meanwhile
    return ("approve", "looks right")


def test_browser_steps_and_a_sandbox_run_show_live_progress(tmux: Tmux, tmp_path: Path) -> None:
    chromium = chromium_or_skip()
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    provider = SQLModelProvider(url)
    provider.ledger.head()
    tmux.start_supervisor(f"--db {url} --notify none", width=220, height=50)
    tmux.wait_for(lambda s: "Agents and processes" in s, 60, "the TUI")
    sandbox = subprocess.Popen(
        [str(SUPERVISOR), "sandbox", "exec", "--timeout", "30", "--db", url, "--",
         "sh", "-c", SANDBOX],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    runs: list[object] = []
    with BrowserSite() as site:
        plan = BrowserPlan([
            lambda page: {"navigate": {"url": site.url("/")}},
            lambda page: {"input": {"index": element_index(page, "name=q"), "text": "alice"}},
            lambda page: {"click": {"index": element_index(page, "<button")}},
        ])  # fmt: skip
        browser = threading.Thread(
            target=lambda: runs.append(run_task(site, provider, chromium, plan, _slow_approve)),
            daemon=True,
        )
        browser.start()
        try:
            run_pattern = re.compile(r"run (\d+)s/30s [▰▱]{8} ([\d.]+ k?B)")
            first = tmux.wait_for(lambda s: run_pattern.search(s) is not None, 30, "sandbox run")
            seen_run = run_pattern.search(first)
            assert seen_run is not None
            later = tmux.wait_for(
                lambda s: (m := run_pattern.search(s)) is not None
                and m.group(1) != seen_run.group(1) and m.group(2) != seen_run.group(2),
                15, "the sandbox run's elapsed time and output growing",
            )  # fmt: skip
            step_pattern = re.compile(r"step (\d)/8 [▰▱]{8} http://127\.0\.0\.1:\d+/")
            browsing = tmux.wait_for(lambda s: step_pattern.search(s) is not None, 90,
                                     "the browser worker's step and URL")  # fmt: skip
            first_step = step_pattern.search(browsing)
            assert first_step is not None
            moved = tmux.wait_for(
                lambda s: (m := step_pattern.search(s)) is not None
                and int(m.group(1)) > int(first_step.group(1)),
                90, "the browser worker moving to a later step",
            )  # fmt: skip
            captures = "\n---\n".join([first, later, browsing, moved])
            (tmp_path / "progress-capture.txt").write_text(captures)
            assert "sandbox.local" in later and "browser_worker" in moved
        finally:
            browser.join(timeout=120)
            sandbox.communicate(timeout=60)
            provider.close()
    assert sandbox.returncode == 0
    assert runs, "the browser task ended"
