"""Orphan approve -> resumed process running its call (issue 13; goal p95 <= 1 s on SQLite).

Each round makes a real orphan: the demo's CRM agent runs in this process until it pauses on
``create_customer``, and the process that waited on it is recorded as gone. The clock starts at
the approval; the TUI's "approve and resume" path follows (``ProcessControl.start_resume``
spawns ``supervisor resume ID``, or hands the id to the warm ``supervisor resume --standby`` the
TUI starts when an orphan appears), and the figure is the time until the ledger holds the claim
of the call (the resumed process is running it). Cold and warm rounds alternate. The resume
process then finishes the run (tool, outcome, model reply); that time is reported too.

The peer, in the same rounds: spawning ``supervisor --version`` and waiting for it to exit,
the floor any out-of-process resume pays (interpreter start and the CLI's import).

    .venv/bin/python bench/bench_resume.py --rounds 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from supervisor.demo.model import SCENARIOS, demo_turn
from supervisor.ledger.models import ApproverContext, ProcessRecord
from supervisor.services.process_control import ProcessControl, _supervisor_command
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import ScriptedModel


def _orphan(provider: SQLModelProvider) -> str:
    from supervisor.demo.agent import make_crm

    agent = make_crm()
    result = agent.run(SCENARIOS["crm"][0], thread_id=f"bench-{uuid.uuid4().hex[:8]}")
    proposal_id = result.proposals[0].proposal_id
    now = datetime.now(UTC)
    gone = f"gone-{uuid.uuid4().hex[:8]}"
    provider.ledger.upsert_process(
        ProcessRecord(process_id=gone, kind="agent_run", pid=1, host="elsewhere",
                      command="killed", status="exited", exit_code=137, started_at=now,
                      heartbeat_at=now)
    )  # fmt: skip
    provider.ledger.record_waiters(gone, [proposal_id])
    agent.provider.close()
    return proposal_id


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-resume-"))
    url = f"sqlite:///{folder / 'ledger.db'}"
    os.environ["SUPERVISOR_DB"] = url
    claimed: list[float] = []
    finished: list[float] = []
    claimed_warm: list[float] = []
    finished_warm: list[float] = []
    peer: list[float] = []
    context = ApproverContext.current(via="cli")
    approver = f"{context.os_user}@{context.host}"
    with ScriptedModel(demo_turn) as model, SQLModelProvider(url) as provider:
        os.environ.update(model.env())
        control = ProcessControl(provider.ledger, url, logs=folder / "logs")
        ledger = provider.ledger
        for round_ in range(2 * args.rounds):
            warm = round_ % 2 == 1  # interleaved: cold spawn, then the TUI's warm standby
            proposal_id = _orphan(provider)
            if warm:  # the TUI starts it when the orphan appears in the inbox
                control.prepare_resume()
                time.sleep(2.0)  # long enough for the standby to have started and imported
            start = time.perf_counter()
            ledger.approve(proposal_id, approver, "bench", context=context, via="tui")
            started = control.start_resume(proposal_id)
            while ledger.execution(proposal_id) is None:
                time.sleep(0.002)
            (claimed_warm if warm else claimed).append(time.perf_counter() - start)
            code = control.child(started.process_id).wait(timeout=120)
            (finished_warm if warm else finished).append(time.perf_counter() - start)
            assert code == 0, (folder / "logs" / f"{started.process_id}.log").read_text()
            assert ledger.get(proposal_id).status.value == "executed"
            if warm:
                continue
            begin = time.perf_counter()
            subprocess.run([*_supervisor_command(), "--version"], check=True, capture_output=True)
            peer.append(time.perf_counter() - begin)
    rows = [
        ("cold: approve -> a new resume process claimed the call", claimed),
        ("cold: approve -> resume finished (tool, outcome, reply)", finished),
        ("warm standby (TUI): approve -> claimed the call", claimed_warm),
        ("warm standby (TUI): approve -> resume finished", finished_warm),
        ("peer: spawn `supervisor --version` to exit", peer),
    ]
    print(f"{args.rounds} rounds, SQLite ledger {url}")
    print(f"{'':58} {'p50':>8} {'p95':>8}")
    for name, values in rows:
        p50, p95 = statistics.median(values), _percentile(values, 0.95)
        print(f"{name:58} {p50 * 1000:7.0f}ms {p95 * 1000:7.0f}ms")
    for label, values in (("cold", claimed), ("warm", claimed_warm)):
        ratio = statistics.median(values) / statistics.median(peer)
        print(f"ratio {label} claim / peer (p50): {ratio:.2f}x")


if __name__ == "__main__":
    main()
