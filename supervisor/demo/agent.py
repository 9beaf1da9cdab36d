"""One demo agent, run as a supervised subprocess: ``python -m supervisor.demo.agent SCENARIO``.

It records itself in the ledger's process table, runs its scenario, and when the run pauses for
approval it waits for a human decision (made in the TUI or with ``supervisor proposals``), then
resumes. The model endpoint comes from OPENAI_BASE_URL and the ledger from SUPERVISOR_DB.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import uuid
from datetime import UTC, datetime

from sandboxes import run_code
from supervisor.demo.model import SCENARIOS
from supervisor.demo.tools import (
    create_customer,
    export_stock_report,
    inventory_lookup,
    replica_inventory_lookup,
)
from supervisor.ledger.lease_time import renew_every
from supervisor.ledger.models import ProcessRecord
from supervisor.runtime.builder import MemAgentBuilder
from supervisor.runtime.policies import ToolResultPolicy
from supervisor.store.provider import SQLModelProvider

HEARTBEAT_SECONDS = 2.0


def _heartbeat(provider: SQLModelProvider, process_id: str, stop: threading.Event) -> None:
    while not stop.wait(renew_every(provider.ledger.lease_seconds, HEARTBEAT_SECONDS)):
        provider.ledger.heartbeat(process_id)


def main(scenario: str) -> int:
    """Run one scenario to completion (waiting for decisions as needed); returns an exit code."""
    query, _ = SCENARIOS[scenario]
    provider = SQLModelProvider()
    process_id = f"demo-{scenario}-{os.getpid()}"
    now = datetime.now(UTC)
    provider.ledger.upsert_process(
        ProcessRecord(
            process_id=process_id, kind="agent_run", pid=os.getpid(), host=socket.gethostname(),
            command=f"supervisor.demo.agent {scenario}", status="running", started_at=now,
            heartbeat_at=now,
        )
    )  # fmt: skip
    stop = threading.Event()
    threading.Thread(target=_heartbeat, args=(provider, process_id, stop), daemon=True).start()
    agent = (
        MemAgentBuilder()
        .with_agent_id(f"demo-{scenario}")
        .with_name(f"Demo {scenario}")
        .with_llm_config({"provider": "openai", "model": "scripted-model"})
        .with_memory_provider(provider)
        .with_tools(
            [
                inventory_lookup,
                create_customer,
                export_stock_report,
                replica_inventory_lookup,
                run_code,
            ]
        )
        .with_tool_result_policy(ToolResultPolicy(offload_above_chars=8_000))
        .build_and_save()
    )
    result = agent.run(query, thread_id=f"demo-{scenario}-{uuid.uuid4().hex[:8]}")
    print(f"[{scenario}] {result.status}", flush=True)
    exit_code = 0
    provider.ledger.record_waiters(process_id, [p.proposal_id for p in result.proposals])
    for proposal in result.proposals:
        provider.ledger.heartbeat(process_id, status="waiting_for_approval")
        print(f"[{scenario}] waiting for a decision on {proposal.proposal_id}", flush=True)
        decided = agent.wait_for_decision(proposal.proposal_id, timeout=24 * 3600)
        provider.ledger.heartbeat(process_id, status="running")
        if decided.proposal_id != proposal.proposal_id:  # a human edited the call
            print(f"[{scenario}] edited by a human: now {decided.proposal_id}", flush=True)
        resumed = agent.resume_approval(decided.proposal_id, continue_model=True)
        answer = resumed.assistant_response or resumed.error_code
        print(f"[{scenario}] {decided.status.value}: {answer}", flush=True)
    if result.output:
        print(f"[{scenario}] {result.output}", flush=True)
    if result.status == "failed":
        exit_code = 1
    stop.set()
    provider.ledger.heartbeat(process_id, status="exited", exit_code=exit_code)
    provider.close()
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
