"""The demo, exported as OTLP and read back with the official OpenTelemetry classes: the calls
that ran are ``execute_tool`` spans, the one an operator rejected and the one left to expire are
approval spans (they never ran, so no other trace would show them).

The demo runs headless as a real process (``supervisor demo --no-tui --approval-ttl``), the
rejection goes through the real CLI, and the expiry is the real clock running out. Chromium is
made unavailable so the browser agent is skipped (its actions are covered elsewhere).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from support.cli import SUPERVISOR, run_cli
from support.otlp import Span, decode_json, spans_of

pytestmark = pytest.mark.slow
PENDING = re.compile(r"^Pending: ([0-9a-f]{32}) (\w+) ")
TTL = 15


def _run_demo(home: Path) -> tuple[int, list[str], dict[str, str]]:
    """Run the demo; reject its ``run_code`` proposal as soon as it is pending, leave the rest."""
    assert SUPERVISOR is not None
    env = {**os.environ, "SUPERVISOR_CHROMIUM": str(home / "no-chromium")}
    demo = subprocess.Popen(
        [SUPERVISOR, "demo", "--no-tui", "--home", str(home), "--approval-ttl", str(TTL)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    url = f"sqlite:///{home / 'ledger.db'}"
    lines: list[str] = []
    pending: dict[str, str] = {}
    timer = threading.Timer(120, demo.kill)  # a hung demo fails the test instead of hanging it
    timer.start()
    try:
        assert demo.stdout is not None
        for line in demo.stdout:
            lines.append(line.rstrip("\n"))
            found = PENDING.match(line)
            if found is None:
                continue
            proposal_id, tool = found.groups()
            pending[tool] = proposal_id
            if tool == "run_code":
                reason = "not in the demo, thanks"
                done = run_cli("proposals", "reject", proposal_id[:8], "--reason", reason,
                               "--db", url, "--approver", "lead")  # fmt: skip
                assert done.returncode == 0, done.stderr
        return demo.wait(), lines, pending
    finally:
        timer.cancel()
        demo.kill()


def test_the_demo_exports_executed_calls_and_the_rejected_and_expired_ones(
    tmp_path: Path,
) -> None:
    home = tmp_path / "demo"
    code, lines, pending = _run_demo(home)
    assert code == 0, "\n".join(lines)
    assert set(pending) == {"run_code", "create_customer"}, "\n".join(lines)
    assert any("[crm] expired" in line for line in lines), "\n".join(lines)

    target = tmp_path / "spans.json"
    url = f"sqlite:///{home / 'ledger.db'}"
    done = run_cli("traces", "export", "--format", "otlp-json", "-o", str(target), "--db", url)
    assert done.returncode == 0, done.stderr
    spans = spans_of(decode_json(target.read_text(encoding="utf-8")))

    def attribute(span: Span, key: str) -> Any:
        return span.attributes.get(key)

    executed = [
        span for span in spans if attribute(span, "gen_ai.operation.name") == "execute_tool"
    ]
    ran = {attribute(span, "gen_ai.tool.name") for span in executed}
    # The read-only lookups and the report ran; the rejected and the expired calls did not.
    assert {"inventory_lookup", "export_stock_report"} <= ran, ran
    assert not ran & {"run_code", "create_customer"}, ran
    approvals = {
        attribute(span, "supervisor.proposal.id"): span
        for span in spans
        if span.name.startswith("approval ")
    }
    rejected = approvals[pending["run_code"]]
    assert rejected.name == "approval run_code"
    assert attribute(rejected, "supervisor.approval.decision") == "rejected"
    assert attribute(rejected, "supervisor.approval.decided_by") == "lead"
    assert attribute(rejected, "supervisor.approval.reason") == "not in the demo, thanks"
    expired = approvals[pending["create_customer"]]
    assert attribute(expired, "supervisor.approval.decision") == "expired"
    assert attribute(expired, "supervisor.approval.wait_ms") >= TTL * 1000 - 1000
    assert expired.events[-1][0] == "expired"
    assert rejected.status == expired.status == 2  # STATUS_CODE_ERROR: the call did not run
