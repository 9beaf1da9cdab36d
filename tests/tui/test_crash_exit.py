"""The command that opens the TUI exits non-zero when the app died of an exception.

Textual catches an unhandled exception, restores the terminal, prints the traceback and
returns from ``run()`` normally; the command must not then exit 0 as if the operator had quit.
``supervisor --db URL`` runs in a real pseudo-terminal: once with a widget that raises (a fault
put in on purpose: no data can crash a pane any more), once quitting with ``q``.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from supervisor.store.provider import SQLModelProvider

pytestmark = pytest.mark.slow

CRASHING_WIDGET = """
import sys

from screens.widgets.processes.processes_pane import ProcessesPane


def show_rows(self, rows, now):
    raise RuntimeError("a pane failed on purpose")


ProcessesPane.show_rows = show_rows
from supervisor.cli.main import main

sys.argv = ["supervisor", "--db", sys.argv[1]]
main()
"""


def _run_in_terminal(
    argv: list[str], *, keys: bytes = b"", after: bytes = b"", limit: float = 60.0
) -> tuple[int, str]:
    """Run ``argv`` on a new 120x40 pseudo-terminal; type ``keys`` once ``after`` was drawn.

    Returns:
        The exit code and everything written to the terminal.
    """
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    child = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    output = b""
    typed = not keys
    deadline = time.monotonic() + limit
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
            if not typed and after in output:
                time.sleep(0.5)
                os.write(master, keys)
                typed = True
            if child.poll() is not None and not ready:
                break
        code = child.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(master)
    return code, output.decode(errors="replace")


def _ledger(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    SQLModelProvider(url).close()
    return url


def test_the_tui_command_exits_non_zero_when_the_app_died_of_an_exception(
    tmp_path: Path,
) -> None:
    script = tmp_path / "crashing_tui.py"
    script.write_text(CRASHING_WIDGET)
    code, output = _run_in_terminal([sys.executable, str(script), _ledger(tmp_path)])
    assert "a pane failed on purpose" in output, output[-2000:]  # Textual's traceback
    assert "error [tui_crashed]" in output, output[-2000:]
    assert code == 1, output[-2000:]


def test_quitting_the_tui_exits_zero(tmp_path: Path) -> None:
    supervisor = str(Path(sys.executable).parent / "supervisor")
    code, output = _run_in_terminal(
        [supervisor, "--db", _ledger(tmp_path)], keys=b"q", after=b"Approval inbox"
    )
    assert "tui_crashed" not in output
    assert code == 0, output[-2000:]
