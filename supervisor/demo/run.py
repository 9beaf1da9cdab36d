"""``supervisor demo``: a scripted model, four demo agents as supervised subprocesses, a ledger.

The agents look up stock, create a CRM customer (which waits for approval), export a large
report (offloaded to a pointer), hit a fallback provider and run code in the sandbox; a Browser
Use worker signs up on a local page, each browser action waiting for approval. With the TUI,
decide in the inbox; without it (``--no-tui``), decide with ``supervisor proposals approve ID
--db URL`` from another terminal, or pass ``--auto-approve``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import platformdirs

from supervisor.demo.model import APPROVAL_TTL_ENV, DEMO_PARENT_ENV, SCENARIOS, demo_turn
from supervisor.errors import SupervisorError
from supervisor.ledger.models import ApproverContext
from supervisor.services.process_control import ProcessControl
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import ScriptedModel

Echo = Callable[[str], object]


_STOP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _quiet_when_closed(echo: Echo) -> Echo:
    """``echo`` that ignores a closed terminal, so stopping the agents never fails on output."""

    def quiet(message: str) -> None:
        try:
            echo(message)
        except OSError:
            pass

    return quiet


def default_home() -> Path:
    """Where the demo keeps its ledger and logs (reused, so a restart shows the same state)."""
    return Path(platformdirs.user_data_dir("agent-supervisor")) / "demo"


class DemoStillRunning(SupervisorError, RuntimeError):
    """``supervisor demo --reset`` was asked to empty a demo ledger that live processes use."""

    code = "demo_still_running"

    def __init__(self, home: Path, process_ids: list[str]) -> None:
        shown = ", ".join(process_ids[:3]) + (" ..." if len(process_ids) > 3 else "")
        super().__init__(
            f"The demo in {home} is still running ({len(process_ids)} live processes: {shown}); "
            "nothing was removed.",
            hint="Quit that demo (q in its TUI) or stop its processes, then run "
            "`supervisor demo --reset` again.",
            home=str(home),
        )


#: What ``supervisor demo --reset`` removes from the demo's folder (and nothing else).
DEMO_FILES = ("ledger.db", "ledger.db-wal", "ledger.db-shm")


def reset_home(home: Path) -> list[Path]:
    """Remove the demo's ledger and agent logs from ``home`` so the next run starts empty.

    Only the files the demo writes are removed (``DEMO_FILES`` and ``logs/*.log``); anything
    else in the folder stays. A demo still running on that ledger is never pulled from under
    its processes.

    Returns:
        The paths removed.

    Raises:
        DemoStillRunning: A process recorded in that ledger is still alive.
    """
    ledger = home / DEMO_FILES[0]
    if ledger.is_file():
        with SQLModelProvider(f"sqlite:///{ledger}", read_only=True) as provider:
            now = provider.ledger.clock.now()
            alive = [p for p in provider.ledger.list_processes() if p.alive_at(now)]
        if alive:
            raise DemoStillRunning(home, [process.process_id for process in alive])
    removed: list[Path] = []
    logs = home / "logs"
    candidates = [home / name for name in DEMO_FILES]
    if logs.is_dir():
        candidates += sorted(logs.glob("*.log"))
    for path in candidates:
        if path.is_file():
            path.unlink()
            removed.append(path)
    return removed


#: How much nicer than the TUI the demo's agents and browser worker run (``nice`` levels):
#: they start together with the TUI, and on a small machine the terminal must draw first.
BACKGROUND_NICENESS = 10


def _in_background(pid: int) -> None:
    """Lower the scheduling priority of the child ``pid`` (inherited by what it starts)."""
    with contextlib.suppress(OSError):  # already gone, or a platform without priorities
        os.setpriority(os.PRIO_PROCESS, pid, BACKGROUND_NICENESS)


class TuiOpener(Protocol):
    """Runs the TUI on a ledger until it is closed (:func:`supervisor.cli.tui.open_tui`)."""

    def __call__(self, db_url: str, *, after_first_frame: Callable[[], None] | None = ...) -> None:
        """``after_first_frame`` is called once the first frame is on screen."""


def _signal_all(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every running agent's process group, without waiting."""
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)


def _stop(processes: list[subprocess.Popen[bytes]], grace: float = 3.0) -> None:
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class _BrowserAgent:
    """The demo's browser agent: a Browser Use worker signing up on a local page."""

    def __init__(self, url: str, echo: Echo) -> None:
        from sandboxes.browser import BrowserTask
        from supervisor.demo.browser_site import BrowserSite, signup_plan

        self.site = BrowserSite().start()
        self.model = ScriptedModel(signup_plan(self.site)).start()
        self.handle = BrowserTask(
            f"Sign up as alice on {self.site.url('/')}",
            allowed_domains=[f"127.0.0.1:{self.site.port}"],
            model=self.model.model_name,
            base_url=self.model.base_url,
            api_key="sk-scripted",
            ledger_url=url,
            max_steps=8,
            approval_timeout=24 * 3600,
            owner="demo-browser",
        ).start()
        self.echo = echo
        echo(f"[browser] signing up on {self.site.url('/')} (every action needs approval)")

    @property
    def running(self) -> bool:
        return self.handle.running

    def finish(self) -> None:
        result = self.handle.stop() if self.handle.running else self.handle.wait(timeout=10)
        posts = [request.form for request in self.site.seen("POST")]
        self.echo(f"[browser] exited {result.exit_code}; form posts seen by the site: {posts}")
        self.model.stop()
        self.site.stop()


def _browser_agent(url: str, echo: Echo) -> _BrowserAgent | None:
    from sandboxes.browser.config import ChromiumNotFound, find_chromium

    try:
        find_chromium()
    except ChromiumNotFound as exc:
        echo(f"[browser] skipped: {exc}")
        return None
    return _BrowserAgent(url, echo)


def run_demo(
    home: Path,
    *,
    tui: bool,
    auto_approve: bool,
    echo: Echo,
    open_tui: TuiOpener | None = None,
    approval_ttl: int | None = None,
) -> int:
    """Start the model and the agents, then open the TUI or follow along headless.

    ``approval_ttl`` (seconds) is how long the agents' proposals stay decidable (default: an
    hour).

    Returns:
        0 when every agent finished (or the TUI was closed), 1 otherwise.
    """
    (home / "logs").mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{home / 'ledger.db'}"
    echo = _quiet_when_closed(echo)
    provider = SQLModelProvider(url)
    model = ScriptedModel(demo_turn).start()
    env = {**os.environ, **model.env(), "SUPERVISOR_DB": url}
    if approval_ttl is not None:
        env[APPROVAL_TTL_ENV] = str(approval_ttl)
    processes: list[subprocess.Popen[bytes]] = []
    browsers: list[_BrowserAgent] = []
    stopping = threading.Event()
    started = threading.Lock()  # held while agents are being started; stopping waits for it
    later: list[str] = []  # what the start-up says while the TUI owns the terminal

    def start_agents(say: Echo) -> None:
        """Start the scenario agents and the browser worker (in TUI mode: after the first
        frame is on screen, from a thread, so the terminal draws before they compete)."""
        with started:
            for scenario in SCENARIOS:
                if stopping.is_set():
                    return
                # In TUI mode the agents log to files (the app owns the terminal).
                log = home / "logs" / f"{scenario}.log"
                output = open(log, "ab") if tui else None
                argv = [sys.executable, "-m", "supervisor.demo.agent", scenario]
                processes.append(
                    subprocess.Popen(
                        [*argv, str(log)] if tui else argv,
                        env=env,
                        stdout=output,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
                if tui:
                    _in_background(processes[-1].pid)
            if stopping.is_set():
                return
            browser = _browser_agent(url, say)
            if browser is not None:
                browsers.append(browser)
                if tui:
                    _in_background(browser.handle.pid)

    env[DEMO_PARENT_ENV] = str(os.getpid())
    # Closing the terminal (SIGHUP) or a plain kill (SIGTERM) ends the demo like quitting it
    # does: the agents and the browser worker lead their own sessions and would outlive us.
    previous = {signum: signal.signal(signum, _exit_on_signal) for signum in _STOP_SIGNALS}
    try:
        echo(f"Demo ledger: {url}")
        echo(f"Agent logs:  {home / 'logs'}")
        # Resumes of earlier demos' orphans (spawned by the TUI or below) need the model too.
        os.environ.update(model.env())
        control = ProcessControl(provider.ledger, url, logs=home / "logs")
        if tui and open_tui is not None:

            def start_in_background() -> None:
                try:
                    start_agents(later.append)
                except Exception as error:  # the TUI owns the terminal: say it after it closes
                    later.append(f"The demo could not start its agents: {error!r}")

            def after_first_frame() -> None:
                threading.Thread(target=start_in_background, name="demo-start", daemon=True).start()

            try:
                open_tui(url, after_first_frame=after_first_frame)
            finally:
                for line in later:
                    echo(line)
            return 0
        start_agents(echo)
        browser = browsers[0] if browsers else None
        try:
            return _follow(provider, processes, browser, auto_approve, url, echo, control)
        finally:
            control.close()
    except KeyboardInterrupt:
        echo("Stopping the demo agents.")
        return 1
    finally:
        for signum in _STOP_SIGNALS:  # a second signal must not cut the stopping short
            signal.signal(signum, signal.SIG_IGN)
        stopping.set()
        with started:  # an agent being started now is in the list once this is taken
            _signal_all(processes)  # they stop while the browser worker does
        try:
            for browser_agent in browsers:
                browser_agent.finish()
        finally:
            _stop(processes)
            model.stop()
            provider.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _follow(
    provider: SQLModelProvider,
    processes: list[subprocess.Popen[bytes]],
    browser: _BrowserAgent | None,
    auto_approve: bool,
    url: str,
    echo: Echo,
    control: ProcessControl,
) -> int:
    """Print each new pending proposal (approve it with ``--auto-approve``) until all end.

    A proposal an earlier demo left (its agent is gone) is shown as an orphan; approving it
    also starts ``supervisor resume`` on it, which runs it and finishes its agent's run.
    """
    seen: set[str] = set()
    resumes: list[subprocess.Popen[bytes]] = []
    context = ApproverContext.current(via="cli")
    approver = f"{context.os_user}@{context.host}"
    while any(process.poll() is None for process in [*processes, *resumes]) or (
        browser is not None and browser.running
    ):
        pending = provider.ledger.list(status="pending", limit=100).items
        orphans = provider.ledger.orphans(pending)
        if orphans and auto_approve:
            control.prepare_resume()  # warm, so the approval below resumes at once
        for proposal in pending:
            if proposal.proposal_id in seen:
                continue
            seen.add(proposal.proposal_id)
            orphaned = proposal.proposal_id in orphans
            label = "Orphaned (from an earlier demo, its agent is gone)" if orphaned else "Pending"
            echo(
                f"{label}: {proposal.proposal_id} {proposal.tool_name} "
                f"{proposal.arguments} ({proposal.policy_reason})"
            )
            if auto_approve:
                provider.ledger.approve(
                    proposal.proposal_id, approver, "approved by supervisor demo --auto-approve",
                    context=context, via="cli",
                )  # fmt: skip
                echo(f"Approved {proposal.proposal_id} as {approver}")
                if orphaned:
                    started = control.start_resume(proposal.proposal_id)
                    resumes.append(control.child(started.process_id))
                    echo(f"Resuming {proposal.proposal_id} in {started.process_id} (log "
                         f"{started.log_path})")  # fmt: skip
            else:
                then = f" && supervisor resume {proposal.proposal_id} --db {url}"
                echo(
                    f"  decide with: supervisor proposals approve {proposal.proposal_id} --db {url}"
                    + (then if orphaned else "")
                )
        time.sleep(0.3)
    failed = [process.returncode for process in [*processes, *resumes] if process.returncode]
    echo("All demo agents finished." if not failed else f"{len(failed)} demo agent(s) failed.")
    return 1 if failed else 0
