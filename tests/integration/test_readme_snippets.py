"""The README's SDK snippets run as written: its shell block starts the scripted model it
describes (on a free port instead of 8400), and its Python blocks run in order, in a fresh
interpreter, against that model and a private ledger. A snippet that stops working, or a
script the scripted model no longer reads, fails here."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _sdk_blocks() -> list[tuple[str, str]]:
    """The fenced blocks of the README's SDK section, as (language, text)."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## The SDK") : text.index("\n## ", text.index("## The SDK") + 1)]
    return [(match.group(1), match.group(2)) for match in _FENCE.finditer(section)]


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def readme_model(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Run the README's shell block (port swapped for a free one); yield the environment it
    exports; stop the model it started."""
    shell = [body for language, body in _sdk_blocks() if language == "bash"]
    assert len(shell) == 1, "the SDK section has one shell block: the scripted model"
    port = str(_free_port())
    script = shell[0].replace("8400", port)
    assert port in script, "the shell block names the port it serves on"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    script += '\necho "PID=$!"\necho "ENV OPENAI_BASE_URL=$OPENAI_BASE_URL"\n'
    script += 'echo "ENV OPENAI_API_KEY=$OPENAI_API_KEY"\n'
    log = tmp_path / "shell.log"
    with log.open("wb") as out:  # the model keeps this file, not a pipe, so bash can finish
        subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, stdout=out,
                       stderr=subprocess.STDOUT, check=True, timeout=60)  # fmt: skip
    lines = log.read_text().splitlines()
    pid = int(next(line for line in lines if line.startswith("PID="))[4:])
    exported = dict(line[4:].split("=", 1) for line in lines if line.startswith("ENV "))
    try:
        deadline = time.monotonic() + 30
        while f"http://127.0.0.1:{port}/v1" not in log.read_text():  # its first line: ready
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield exported
    finally:
        os.kill(pid, signal.SIGTERM)


def test_the_readme_sdk_snippets_run_as_written(
    readme_model: dict[str, str], tmp_path: Path
) -> None:
    python = [body for language, body in _sdk_blocks() if language == "python"]
    assert len(python) == 2, "a governed tool, then the agent that pauses for approval"
    checks = """
assert result.status == "awaiting_approval" and not result.outcomes, result
assert resumed.consumed
assert CUSTOMERS["ada@example.com"]["id"] == "cus_1"
assert resumed.assistant_response == "Created Ada Lovelace (cus_1).", resumed
assert [o["status"] for o in agent.last_tool_outcomes] == ["success"]
print("README OK")
"""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SUPERVISOR_")}
    env.update(readme_model, SUPERVISOR_HOME=str(tmp_path / "home"))
    done = subprocess.run(
        [sys.executable, "-"], input="\n".join(python) + checks, text=True, cwd=tmp_path,
        env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("README OK")
