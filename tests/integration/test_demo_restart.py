"""The demo's restart story: quit a demo while its agents wait, start it again, and the earlier
run's proposals show as orphans; approving one resumes it and its agent's run completes.

Real parts: two ``supervisor demo --no-tui`` processes in a row on one demo folder, the first
stopped with SIGTERM (as closing its terminal does) while the CRM and sandbox agents wait.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from support.cli import SUPERVISOR, run_cli

from supervisor.errors import SupervisorError
from supervisor.ledger.models import ProposalStatus
from supervisor.store.provider import SQLModelProvider

WAITING = ("create_customer", "run_code")


def _waiting_tools(url: str) -> set[str]:
    try:
        with SQLModelProvider(url, read_only=True) as provider:
            pending = provider.ledger.list(status="pending").items
            alive = provider.ledger.waiters([p.proposal_id for p in pending])
            return {p.tool_name for p in pending if p.proposal_id in alive}
    except SupervisorError:  # the first demo has not created its ledger yet
        return set()


def test_a_restarted_demo_shows_the_earlier_runs_proposals_as_orphans_and_resumes_them(
    tmp_path: Path,
) -> None:
    home = tmp_path / "demo"
    url = f"sqlite:///{home / 'ledger.db'}"
    assert SUPERVISOR is not None
    first = subprocess.Popen(
        [SUPERVISOR, "demo", "--no-tui", "--home", str(home)], cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not set(WAITING) <= _waiting_tools(url):
            assert time.monotonic() < deadline, "the first demo's agents never waited"
            assert first.poll() is None, first.stdout.read() if first.stdout else ""
            time.sleep(0.2)
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    with SQLModelProvider(url, read_only=True) as provider:
        left = {p.tool_name: p.proposal_id for p in provider.ledger.list(status="pending").items}
        orphans = provider.ledger.orphans(provider.ledger.list(status="pending").items)
    earlier = {tool: left[tool] for tool in WAITING}
    assert set(earlier.values()) <= set(orphans)  # quitting released the agents' leases at once

    second = run_cli(
        "demo", "--no-tui", "--auto-approve", "--home", str(home), cwd=tmp_path, timeout=600
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-2000:]
    for tool, proposal_id in earlier.items():
        assert f"Orphaned (from an earlier demo, its agent is gone): {proposal_id} {tool}" in (
            second.stdout
        )
        assert f"Resuming {proposal_id} in resume-" in second.stdout
    assert "All demo agents finished." in second.stdout
    with SQLModelProvider(url, read_only=True) as provider:
        for proposal_id in earlier.values():
            assert provider.ledger.get(proposal_id).status is ProposalStatus.EXECUTED
        resumes = [p for p in provider.ledger.list_processes() if p.process_id.startswith("resume")]
    assert sorted((p.status, p.exit_code) for p in resumes) == [("exited", 0), ("exited", 0)]
    logs = "".join(path.read_text() for path in (home / "logs").glob("resume-*.log"))
    assert logs.count("[resume] completed: Done:") == 2


def _children_of(parent: int) -> dict[int, str]:
    """Processes the demo ``parent`` started, found by the parent pid in their environment
    (they lead their own sessions, so they are not in its process group)."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        marks = {f"SUPERVISOR_DEMO_PARENT={parent}", f"SUPERVISOR_BROWSER_PARENT={parent}"}
        if any(item.decode(errors="replace") in marks for item in environ):
            found[int(entry.name)] = cmdline
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_demo_killed_with_sigkill_leaves_no_agent_or_browser_worker_running(
    tmp_path: Path,
) -> None:
    home = tmp_path / "demo"
    url = f"sqlite:///{home / 'ledger.db'}"
    assert SUPERVISOR is not None
    demo = subprocess.Popen(
        [SUPERVISOR, "demo", "--no-tui", "--home", str(home)], cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=dict(os.environ),
    )  # fmt: skip
    children: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 180
        while not set(WAITING) <= _waiting_tools(url):
            assert time.monotonic() < deadline, "the demo's agents never waited"
            assert demo.poll() is None
            time.sleep(0.2)
        children = _children_of(demo.pid)
        assert sum("supervisor.demo.agent" in line for line in children.values()) >= 2
        demo.kill()  # SIGKILL: the demo cannot stop anything itself
        demo.wait(timeout=30)
        deadline = time.monotonic() + 60
        while any(_running(pid) for pid in children):
            left = {pid: children[pid] for pid in children if _running(pid)}
            assert time.monotonic() < deadline, f"still running after the demo died: {left}"
            time.sleep(0.2)
    finally:
        if demo.poll() is None:
            demo.kill()
        for pid in children:
            if _running(pid):
                os.killpg(pid, signal.SIGKILL)
