"""Expiry sweep: how long sweeping N expired proposals holds the ledger's write lock.

Every audited write queues behind a sweep (on PostgreSQL the audit chain's advisory lock, on
SQLite the one writer), so a sweep of many expired proposals is a pause for the whole team.
*Ours* is ``batched_sweep`` (one UPDATE for the batch, one INSERT for its audit
records and, on PostgreSQL, their NOTIFYs in the same statement). The *peer* is the per-row
path the ledger used before, run in the same process on the same ledger: the same transaction
expiring each proposal with its own conditional UPDATE and audit INSERT (``_expire_in_tx``, still
what a claim or approve of one expired proposal uses). Rounds alternate which runs first. In
each sweep a claim of an unrelated approved proposal starts 20 ms in: its latency is what an
agent sees while the sweep holds the lock.

    .venv/bin/python bench/bench_sweep.py                    # SQLite, then PostgreSQL
    .venv/bin/python bench/bench_sweep.py --proposals 1000 --rounds 5 --no-postgres

PostgreSQL is a throwaway durable cluster (``tests/support/postgres.py``, fsync and
synchronous_commit on), or the server given by ``--pg-url``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import sqlalchemy as sa  # noqa: E402
from sqlmodel import SQLModel  # noqa: E402

from supervisor.ledger.service import ApprovalLedger  # noqa: E402
from supervisor.store.convert import proposal_from_row  # noqa: E402
from supervisor.store.provider import SQLModelProvider  # noqa: E402

TTL = 0.3


def per_row_sweep(ledger: ApprovalLedger, limit: int) -> list[str]:
    """The peer: the sweep as the ledger did it before (the due proposals read whole, then a
    conditional UPDATE and an audit INSERT per proposal), in one transaction."""
    table = SQLModel.metadata.tables["proposal"]
    with ledger.repository.write() as tx:
        now = ledger._now()
        due = (
            sa.select(table)
            .where(table.c.status.in_(["pending", "approved"]), table.c.expires_at <= now)
            .order_by(table.c.expires_at, table.c.id)
            .limit(limit)
        )
        return [
            proposal.proposal_id
            for proposal in map(proposal_from_row, tx._execute(due).all())
            if ledger._expire_in_tx(tx, proposal, now)
        ]


def batched_sweep(ledger: ApprovalLedger, limit: int) -> list[str]:
    """Ours: the ledger's sweep."""
    return ledger.expire_due(limit)


def one_sweep(
    ledger: ApprovalLedger, n: int, sweep: Callable[[ApprovalLedger, int], list[str]], tag: str
) -> tuple[float, float]:
    """Propose ``n`` short-lived proposals, let them expire, sweep them while a claim waits:
    (sweep ms, claim ms)."""
    for i in range(n):
        ledger.propose(
            "create_customer", "schema-v1", {"name": f"{tag}-{i}", "email": "x@example.com"},
            owner="agent", thread_id="t", policy_reason="creates a customer", ttl_seconds=TTL,
        )  # fmt: skip
    keep = ledger.propose("create_customer", "schema-v1", {"name": f"{tag}-keep"}, owner="agent")
    ledger.approve(keep.proposal_id, "op@example.com")
    time.sleep(TTL + 0.1)
    claim: dict[str, float] = {}

    def claimer() -> None:
        time.sleep(0.02)
        started = time.perf_counter()
        ledger.claim(keep.proposal_id, keep.args_hash, executor="agent")
        claim["ms"] = (time.perf_counter() - started) * 1000

    thread = threading.Thread(target=claimer)
    thread.start()
    started = time.perf_counter()
    expired = sweep(ledger, n)
    swept = (time.perf_counter() - started) * 1000
    thread.join()
    ledger.complete(keep.proposal_id, "success", executor="agent")
    if len(expired) != n:
        raise SystemExit(f"{tag}: expired {len(expired)} of {n}")
    return swept, claim["ms"]


def run(label: str, url: str, n: int, rounds: int) -> None:
    with SQLModelProvider(url) as provider:
        ledger = provider.ledger
        one_sweep(ledger, 50, batched_sweep, "warm-a")  # compile, connect
        one_sweep(ledger, 50, per_row_sweep, "warm-b")
        ours: list[tuple[float, float]] = []
        peer: list[tuple[float, float]] = []
        for r in range(rounds):
            order = [(ours, batched_sweep), (peer, per_row_sweep)]
            for samples, sweep in order if r % 2 == 0 else order[::-1]:
                samples.append(one_sweep(ledger, n, sweep, f"{r}-{len(samples)}-{id(samples)}"))
        if not ledger.verify().ok:
            raise SystemExit(f"{label}: the audit chain does not verify")

    def med(samples: list[tuple[float, float]], i: int) -> float:
        return statistics.median(s[i] for s in samples)

    print(
        f"| {label} | {n:,} | {med(peer, 0):.1f} | {med(ours, 0):.1f} | "
        f"**{med(peer, 0) / med(ours, 0):.1f}x** | {med(peer, 1):.1f} | {med(ours, 1):.1f} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proposals", type=int, default=1000, help="expired per sweep")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--pg-url")
    options = parser.parse_args()
    print(
        "| ledger | expired per sweep | per-row sweep ms (peer) | batched sweep ms (ours) | "
        "peer / ours | claim during peer sweep ms | claim during ours ms |\n"
        "|---|---:|---:|---:|---:|---:|---:|"
    )
    with tempfile.TemporaryDirectory() as home:
        url = f"sqlite:///{Path(home) / 'ledger.db'}"
        run("SQLite", url, options.proposals, options.rounds)
    if options.no_postgres:
        return
    from support.postgres import PostgresCluster

    cluster = PostgresCluster(server_url=options.pg_url, fast=False)
    cluster.start()
    try:
        run("PostgreSQL", cluster.create_database("sweep"), options.proposals, options.rounds)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
