"""One demo agent, run as a supervised subprocess: ``python -m supervisor.demo.agent SCENARIO``.

It records itself in the ledger's process table (with a lease its heartbeat renews), runs its
scenario, and when the run pauses for approval it waits for a human decision (made in the TUI
or with ``supervisor proposals``), then resumes - the same loop as ``supervisor run``. The model
endpoint comes from OPENAI_BASE_URL and the ledger from SUPERVISOR_DB.

Each scenario's agent has a zero-argument factory here (``make_crm`` ...), recorded as the
agent's restart recipe: when a demo is quit while a proposal waits, the next demo shows it
orphaned, and approving it resumes it with ``supervisor resume`` through that factory (this
module is on every resume allowlist: it ships with the package).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid

from sandboxes import run_code
from supervisor.demo.model import APPROVAL_TTL_ENV, DEMO_PARENT_ENV, SCENARIOS
from supervisor.demo.tools import (
    create_customer,
    export_stock_report,
    inventory_lookup,
    replica_inventory_lookup,
)
from supervisor.runtime.agent import MemAgent
from supervisor.runtime.builder import MemAgentBuilder
from supervisor.runtime.host import (
    STOPPED_EXIT_CODE,
    RunStopped,
    drive,
    model_of,
    record_restart,
    register_process,
    stop_on_signals,
)
from supervisor.runtime.policies import ContextPolicy, ToolResultPolicy
from supervisor.services.rendering import visible_escapes


def approval_ttl() -> int:
    """Seconds from ``SUPERVISOR_DEMO_APPROVAL_TTL`` (set by the demo), else one hour."""
    value = os.environ.get(APPROVAL_TTL_ENV, "")
    return int(value) if value.isdigit() and int(value) >= 1 else 3600


def build(scenario: str) -> MemAgent:
    """The scenario's agent on the ledger named by SUPERVISOR_DB, built and saved."""
    agent = (
        MemAgentBuilder()
        .with_agent_id(f"demo-{scenario}")
        .with_name(f"Demo {scenario}")
        .with_llm_config({"provider": "openai", "model": "scripted-model"})
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
        .with_context_policy(ContextPolicy(approval_ttl_seconds=approval_ttl()))
        .build_and_save()
    )
    record_restart(agent, f"supervisor.demo.agent:make_{scenario}", allow=False)
    return agent


def make_inventory() -> MemAgent:
    """The inventory scenario's agent (a restart recipe)."""
    return build("inventory")


def make_crm() -> MemAgent:
    """The CRM scenario's agent (a restart recipe)."""
    return build("crm")


def make_report() -> MemAgent:
    """The report scenario's agent (a restart recipe)."""
    return build("report")


def make_sandbox() -> MemAgent:
    """The sandbox scenario's agent (a restart recipe)."""
    return build("sandbox")


def make_fallback() -> MemAgent:
    """The fallback scenario's agent (a restart recipe)."""
    return build("fallback")


def say(line: str) -> None:
    """Print ``line`` escaped, as one write: the demo's agents share its terminal (or pipe).

    ``print`` writes the text and its newline separately when Python runs unbuffered
    (``PYTHONUNBUFFERED``), so another agent's line could land between them and be cut.
    """
    sys.stdout.write(visible_escapes(line) + "\n")
    sys.stdout.flush()


def _stop_with_parent(parent: int) -> None:
    """SIGTERM this process once ``parent`` is no longer its parent (the demo was killed
    without stopping its agents, e.g. SIGKILL): the run stops as if the demo had quit."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)


def main(scenario: str, log_path: str | None = None) -> int:
    """Run one scenario to completion (waiting for decisions as needed); returns an exit code.

    SIGTERM (the demo quitting) records the run ``stopped`` and releases its lease at once, so
    the next demo shows its undecided proposals as orphans straight away.
    """
    query, _ = SCENARIOS[scenario]
    parent = os.environ.get(DEMO_PARENT_ENV, "")
    if parent.isdigit():  # started by the demo (gone already: stop at once)
        threading.Thread(
            target=_stop_with_parent, args=(int(parent),), name="demo-parent", daemon=True
        ).start()
    agent = build(scenario)
    process = register_process(
        agent.ledger, f"supervisor.demo.agent {scenario}", f"demo-{scenario}-{os.getpid()}",
        log_path=log_path,
    )  # fmt: skip

    def echo(line: str) -> None:
        say(line.replace("[run]", f"[{scenario}]", 1))

    exit_code, status = 1, "exited"
    try:
        with stop_on_signals(), process.heartbeats(), process.reporting_steps(model_of(agent)):
            result = drive(
                agent, query, process, echo, thread_id=f"demo-{scenario}-{uuid.uuid4().hex[:8]}"
            )
        exit_code = 1 if result is not None and result.status == "failed" else 0
        if result is not None and result.output:
            echo(f"[run] {result.output}")
        elif result is not None and result.error:
            echo(f"[run] {result.status}: {result.error}")
    except RunStopped as stopped:
        echo(f"[run] stopped by {stopped}")
        status, exit_code = "stopped", STOPPED_EXIT_CODE
    finally:
        process.set_status(status, exit_code)
        agent.provider.close()
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
