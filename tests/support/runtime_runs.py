"""An agent run in its own process (``support.runtime_proc``): paused on a proposal, and a
second process waiting to resume it once decided."""

from __future__ import annotations

import json
import subprocess
import sys


def pause(env: dict[str, str]) -> str:
    """Run the agent until it asks to create Ada; the id of the proposal it left pending."""
    done = subprocess.run(
        [sys.executable, "-m", "support.runtime_proc", "pause", "Create Ada"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (proposal_id,) = json.loads(done.stdout.strip().splitlines()[-1])
    return str(proposal_id)


def start_waiter(env: dict[str, str], proposal_id: str) -> subprocess.Popen[str]:
    """A process waiting on ``proposal_id`` to resume the run (it has said ``waiting``)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "support.runtime_proc", "wait-resume", proposal_id],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "waiting"
    return process
