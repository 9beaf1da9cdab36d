"""Resuming a call whose executor died mid-call: recovery first, the turn waits for a human's
finding, then continues with it; a call that ran before its resumer stopped continues too.

A real SQLite ledger and the scripted model (a loopback chat-completions server); the dead
executor is a real process that was started and reaped, so its pid is really gone.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.agents import ADA, approved_create_customer, side_effects

from supervisor import SQLModelProvider
from supervisor.ledger.models import ExecutorIdentity, ProposalStatus
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall, Turn


@pytest.fixture(autouse=True)
def _side_effect_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDE_EFFECT_FILE", str(tmp_path / "side_effects.log"))


def _dead_executor() -> ExecutorIdentity:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return ExecutorIdentity(executor_id="agent:crm", pid=child.pid, host=socket.gethostname())


def _tool_message(request: Any) -> dict[str, Any]:
    [message] = [m for m in request.messages if m["role"] == "tool"]
    told: dict[str, Any] = json.loads(message["content"])
    return told


def test_a_stranded_call_waits_for_the_human_then_the_turn_continues_with_the_finding(
    provider: SQLModelProvider,
) -> None:
    script: list[Turn] = [
        CallTools([ToolCall("create_customer", ADA)]),
        Reply("Ada was not created."),
    ]
    with ScriptedModel(script) as model:
        agent, proposal = approved_create_customer(provider, model, "crm")
        ledger = provider.ledger
        ledger.claim(proposal.proposal_id, proposal.args_hash, _dead_executor())

        waiting = agent.resume_approval(proposal.proposal_id, continue_model=True)
        assert waiting.error_code == "needs_reconciliation"  # recovery ran before the resume
        assert waiting.proposal.status is ProposalStatus.NEEDS_RECONCILIATION
        assert waiting.run is None and len(model.requests) == 1  # the turn waits for a human
        assert side_effects() == []  # never re-run

        ledger.reconcile(proposal.proposal_id, "failed", "op", "No customer Ada in the CRM")
        resumed = agent.resume_approval(proposal.proposal_id, continue_model=True)
        assert resumed.assistant_response == "Ada was not created."
        assert resumed.error_code == "reconciled_failed" and resumed.ok is False
        told = _tool_message(model.requests[1])
        assert told["reconciled"] == "failed"
        assert told["reason"] == "No customer Ada in the CRM"
        assert "did not take effect" in told["message"]
        assert agent.last_tool_outcomes[-1]["reason_code"] == "reconciled_failed"

        again = agent.resume_approval(proposal.proposal_id, continue_model=True)
        assert again.run is None and len(model.requests) == 2  # the turn moved on
    assert side_effects() == []


def test_a_call_that_ran_before_its_resumer_stopped_continues_the_turn_once(
    provider: SQLModelProvider,
) -> None:
    script: list[Turn] = [
        CallTools([ToolCall("create_customer", ADA)]),
        Reply("Ada is in the CRM."),
    ]
    with ScriptedModel(script) as model:
        agent, proposal = approved_create_customer(provider, model, "crm")
        ran = agent.resume_approval(proposal.proposal_id, continue_model=False)
        assert ran.ok and len(model.requests) == 1  # the tool ran, the model was not called

        continued = agent.resume_approval(proposal.proposal_id, continue_model=True)
        assert continued.error_code == "already_consumed"  # this resume ran nothing
        assert continued.assistant_response == "Ada is in the CRM."
        assert _tool_message(model.requests[1])["customer_id"] == "cus_ada"

        again = agent.resume_approval(proposal.proposal_id, continue_model=True)
        assert again.run is None and len(model.requests) == 2
    assert side_effects() == ["create_customer Ada ada@example.com"]
