"""Client CPU per step of the approval cycle on PostgreSQL, ours against bare psycopg.

One process runs the cycle (propose, ``approve_many`` of one, claim, complete) through the
ledger on a throwaway cluster, and the same four steps' row writes as bare psycopg SQL, one
commit each (the team bench's peer), alternating rounds. Printed: the CPU time this process
spends per step (``time.process_time``: the client's own work, not the wait for the server),
and ours / peer. What a team's processes pay per step on the client, whatever the machine's
other load (bench/RESULTS.md, goal 5, twelfth pass).

    .venv/bin/python bench/bench_pg_steps.py [--cycles 1500] [--rounds 3] [--pg-url URL]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

STEPS = ("propose", "approve", "claim", "complete")


def ours(ledger: Any, cycles: int, offset: int) -> dict[str, float]:
    """CPU seconds per step over ``cycles`` cycles through the ledger."""
    spent = dict.fromkeys(STEPS, 0.0)
    for n in range(offset, offset + cycles):
        started = time.process_time()
        proposal = ledger.propose(
            "create_customer", "schema-v1",
            {"name": f"customer {n}", "email": f"c{n}@example.com"},
            owner="agent-0", thread_id="agent-0-thread", policy_reason="creates a customer",
            domains=("crm",),
        )  # fmt: skip
        proposed = time.process_time()
        ledger.approve_many([proposal.proposal_id], "op@example.com", "ok")
        approved = time.process_time()
        ledger.claim(proposal.proposal_id, proposal.args_hash, executor="agent-0")
        claimed = time.process_time()
        ledger.complete(proposal.proposal_id, "success", executor="agent-0")
        completed = time.process_time()
        spent["propose"] += proposed - started
        spent["approve"] += approved - proposed
        spent["claim"] += claimed - approved
        spent["complete"] += completed - claimed
    return {step: value / cycles for step, value in spent.items()}


def peer(url: str, cycles: int) -> dict[str, float]:
    """CPU seconds per step of the same row writes as bare psycopg SQL, one commit each (the
    team bench's peer, on its own connection)."""
    from bench_team import peer_steps

    samples = peer_steps(url, cycles, clock=time.process_time)
    return {step: sum(samples[step]) / 1000 / cycles for step in STEPS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pg-url")
    options = parser.parse_args()

    from bench_team import postgres

    from supervisor.store.provider import SQLModelProvider

    with postgres(options.pg_url) as cluster:
        url = cluster.create_database(f"steps_{uuid.uuid4().hex[:8]}")
        peer_url = cluster.create_database(f"steps_peer_{uuid.uuid4().hex[:8]}")
        with SQLModelProvider(peer_url) as made:  # the same schema, made by our migrations
            made.ledger  # noqa: B018 - brings the schema current
        with SQLModelProvider(url) as provider:
            ledger = provider.ledger
            ours(ledger, 100, 0)  # warm: statements prepared, imports done
            peer(peer_url, 100)
            results: dict[str, list[dict[str, float]]] = {"ours": [], "peer": []}
            for round_ in range(options.rounds):
                results["ours"].append(ours(ledger, options.cycles, (round_ + 1) * 100_000))
                results["peer"].append(peer(peer_url, options.cycles))
    print(f"{options.rounds} rounds of {options.cycles} cycles; client CPU per step, median")
    print("| step | ours us | bare psycopg us | ours / peer |")
    print("|---|---:|---:|---:|")
    for step in STEPS:
        mine = statistics.median(r[step] for r in results["ours"]) * 1e6
        theirs = statistics.median(r[step] for r in results["peer"]) * 1e6
        print(f"| {step} | {mine:.0f} | {theirs:.0f} | {mine / theirs:.2f}x |")


if __name__ == "__main__":
    main()
