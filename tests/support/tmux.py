"""Driving the real TUI in tmux: one server on its own socket (``-L``), a fixed pane size.

``capture-pane`` reads the screen and ``send-keys`` presses keys. Missing tmux skips locally
and fails under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from support.required import unavailable

SUPERVISOR = str(Path(sys.executable).parent / "supervisor")


class Tmux:
    """One detached tmux server and session, driven by its socket name."""

    def __init__(self, socket_name: str, session: str) -> None:
        self.socket_name = socket_name
        self.session = session

    def __call__(self, *args: str) -> str:
        completed = subprocess.run(
            ["tmux", "-L", self.socket_name, *args],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
        return completed.stdout

    def start_supervisor(
        self,
        args: str,
        *,
        width: int,
        height: int = 50,
        env: dict[str, str] | None = None,
        raw_output: Path | None = None,
    ) -> None:
        """Run ``supervisor ARGS`` in the session, on a ``width`` x ``height`` pane.

        Args:
            env: Variables set for the supervisor only.
            raw_output: A file that receives everything the supervisor writes to the terminal,
                escape sequences included (``pipe-pane -O``), from its first byte.
        """
        # COLUMNS/LINES (set by pytest and others) would override the pane size in Textual.
        extra = " ".join(shlex.quote(f"{key}={value}") for key, value in (env or {}).items())
        command = f"env -u COLUMNS -u LINES TERM=xterm-256color {extra} {SUPERVISOR} {args}"
        if raw_output is not None:  # the pane starts paused on a read, so nothing is missed
            command = f"read -r _; exec {command}"
        self("new-session", "-d", "-s", self.session, "-x", str(width), "-y", str(height), command)
        if raw_output is not None:
            self("pipe-pane", "-O", "-t", self.session, f"cat >> {shlex.quote(str(raw_output))}")
            self.keys("Enter")

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", self.session)

    def keys(self, *keys: str) -> None:
        self("send-keys", "-t", self.session, *keys)

    def wait_for(self, predicate: Callable[[str], bool], limit: float, what: str) -> str:
        deadline = time.monotonic() + limit
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if predicate(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{what} not seen within {limit}s; screen was:\n{screen}")


@contextlib.contextmanager
def tmux_server(prefix: str, *, session: str, shown_while_open: str) -> Iterator[Tmux]:
    """A fresh tmux server named ``prefix-<random>``; afterwards ``q`` closes the TUI (until
    ``shown_while_open`` is gone from the screen, at most 10 s), the server is killed and the
    pane's process SIGKILLed."""
    if shutil.which("tmux") is None:
        unavailable("tmux is not installed")
    tmux = Tmux(f"{prefix}-{uuid.uuid4().hex[:8]}", session=session)
    pane_pid = ""
    try:
        yield tmux
        pane_pid = tmux("display-message", "-p", "-t", tmux.session, "#{pane_pid}").strip()
        tmux.keys("q")
        with contextlib.suppress(AssertionError):
            tmux.wait_for(lambda screen: shown_while_open not in screen, 10, "the TUI closing")
    finally:
        tmux("kill-server")
        if pane_pid.isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pane_pid), signal.SIGKILL)
