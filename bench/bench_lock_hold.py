"""How long each step of an approval cycle holds the audit chain's lock on PostgreSQL.

Every audited write in a team's ledger queues behind the one holding the chain's lock
(``pg_advisory_xact_lock``), so the time a step holds it bounds the whole team's approval rate
(docs/scale.md, "What breaks first"). For propose, approve, claim and complete, one process
measures from the end of the lock statement to the step's return (the commit included), and
splits it into time in statements (the client's wait for the server included), the rest of the
commit, and Python in between; it also counts the statements and the round trips (statements
sent together in a pipeline are one). Where the lock is sent in a pipeline with the first read,
the hold is counted from that pipeline's send: an upper bound that includes the round trip in
which the server grants the lock. A step that takes the lock late sends it with its writes:
the hold is counted from that send (the guard that follows the lock counts as a statement).
The peer is another checkout (``--compare DIR``, e.g. a ``git archive`` of main) measured in
the same rounds on the same server, in alternating order.

    .venv/bin/python bench/bench_lock_hold.py --compare /tmp/base --rounds 4

PostgreSQL is a throwaway durable cluster (``tests/support/postgres.py``, fsync and
synchronous_commit on), or the server given by ``--pg-url``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
STEPS = ("propose", "approve", "claim", "complete")


def measure(url: str, cycles: int) -> dict[str, dict[str, float]]:
    """Medians per step over ``cycles`` cycles (after 50 to warm up) on the ledger at ``url``."""
    import sqlalchemy as sa

    from supervisor.ledger.service import ApprovalLedger
    from supervisor.store.engine import create_ledger_engine

    engine = create_ledger_engine(url)
    ledger = ApprovalLedger(engine)
    state: dict[str, Any] = {}

    @sa.event.listens_for(engine, "before_cursor_execute")
    def _before(*_: Any) -> None:
        state["sent"] = time.perf_counter()

    @sa.event.listens_for(engine, "after_cursor_execute")
    def _after(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        now = time.perf_counter()
        if "pg_advisory_xact_lock" in statement:
            state.update(locked=now, statements=0.0, count=0, trips=0)
        elif "locked" in state:
            state["statements"] += now - state["sent"]
            state["count"] += 1
            state["trips"] += 1

    _time_driver_statements(state)

    @sa.event.listens_for(engine, "commit")
    def _commit(_conn: Any) -> None:
        state["commit"] = time.perf_counter()

    samples: dict[str, list[tuple[float, float, float, int, int]]] = {step: [] for step in STEPS}

    def timed(step: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        state.pop("locked", None)
        result = call(*args, **kwargs)
        end = time.perf_counter()
        samples[step].append(
            (
                end - state["locked"],
                state["statements"],
                end - state["commit"],
                state["count"],
                state["trips"],
            )
        )
        return result

    for index in range(cycles + 50):
        arguments = {"customer": f"c-{index}", "amount": index, "note": "x" * 200}
        made = timed("propose", ledger.propose, tool_name="refund", tool_schema_hash="0" * 64,
                     arguments=arguments)  # fmt: skip
        approved = timed("approve", ledger.approve, made.proposal_id, "alice", "ok")
        timed("claim", ledger.claim, approved.proposal_id, approved.args_hash, "worker")
        timed("complete", ledger.complete, approved.proposal_id, "success")
    ledger.close()
    engine.dispose()
    result = {}
    for step, rows in samples.items():
        rows = rows[50:]
        hold, statements, commit = (statistics.median(row[k] for row in rows) for k in range(3))
        result[step] = {
            "hold_ms": hold * 1e3, "statements_ms": statements * 1e3, "commit_ms": commit * 1e3,
            "python_ms": (hold - statements - commit) * 1e3, "statements": rows[-1][3],
            "round_trips": rows[-1][4],
        }  # fmt: skip
    return result


def _time_driver_statements(state: dict[str, Any]) -> None:
    """Count the statements a checkout runs on psycopg directly (past SQLAlchemy's events) and
    its pipelines: a statement sent in a pipeline is a statement but not a round trip; the
    pipeline's end is one round trip. A checkout without them is left as it is."""
    try:
        from supervisor.store import direct_pg  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return

    def timed(original: Any, statements: int, trips: int) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if "locked" not in state:
                return original(*args, **kwargs)
            sent = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                state["statements"] += time.perf_counter() - sent
                state["count"] += statements
                state["trips"] += trips

        return call

    statement = direct_pg.PgDirectStatement
    statement.execute = timed(statement.execute, 1, 1)  # type: ignore[method-assign]
    read_together = getattr(direct_pg, "read_together", None)
    if read_together is not None:  # the lock sent with the first read: held from the send on

        def locked_read(driver: Any, reads: Any) -> Any:
            if "pg_advisory_xact_lock" not in reads[0][0].sql:
                return timed(read_together, len(reads), 1)(driver, reads)
            sent = time.perf_counter()
            state.update(locked=sent, statements=0.0, count=0, trips=0)
            try:
                return read_together(driver, reads)
            finally:
                state["statements"] += time.perf_counter() - sent
                state["count"] += len(reads) - 1
                state["trips"] += 1

        direct_pg.read_together = locked_read
    pipeline = getattr(direct_pg, "PgPipeline", None)
    if pipeline is not None:
        send = timed(pipeline.send, 1, 0)

        def sending(self: Any, statement: Any, *args: Any, **kwargs: Any) -> Any:
            if "pg_advisory_xact_lock" in statement.sql:  # a late lock: with the writes
                state.update(locked=time.perf_counter(), statements=0.0, count=-1, trips=0)
            return send(self, statement, *args, **kwargs)

        pipeline.send = sending
        pipeline.finish = timed(pipeline.finish, 0, 1)


def _run_tree(tree: Path | None, url: str, cycles: int) -> dict[str, dict[str, float]]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    output = subprocess.run(
        [sys.executable, __file__, "--measure", url, "--cycles", str(cycles)],
        env=env, check=True, capture_output=True, text=True, cwd=tree or REPO,
    ).stdout  # fmt: skip
    return json.loads(output.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--compare", type=Path, help="another checkout, measured alike")
    parser.add_argument("--pg-url")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.measure:
        print(json.dumps(measure(options.measure, options.cycles)))
        return
    sys.path.insert(0, str(REPO / "tests"))
    from support.postgres import PostgresCluster

    trees: dict[str, Path | None] = {"ours": None}
    if options.compare is not None:
        trees["peer"] = options.compare
    runs: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in trees}
    cluster = PostgresCluster(server_url=options.pg_url, fast=False)
    cluster.start()
    try:
        for round_index in range(options.rounds):
            order = list(trees.items())
            if round_index % 2:
                order.reverse()
            for name, tree in order:
                url = cluster.create_database(f"hold_{name}_{round_index}")
                runs[name].append(_run_tree(tree, url, options.cycles))
    finally:
        cluster.stop()
    print(
        "| step | tree | lock held ms | in statements ms | statements | round trips | commit ms "
        "| Python ms |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for step in STEPS:
        for name in trees:
            rounds = [run[step] for run in runs[name]]
            figure = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
            print(
                f"| {step} | {name} | {figure['hold_ms']:.3f} | {figure['statements_ms']:.3f} | "
                f"{figure['statements']:.0f} | {figure['round_trips']:.0f} + commit | "
                f"{figure['commit_ms']:.3f} | {figure['python_ms']:.3f} |"
            )
    if options.compare is not None:
        for step in STEPS:
            ours = statistics.median(run[step]["hold_ms"] for run in runs["ours"])
            peer = statistics.median(run[step]["hold_ms"] for run in runs["peer"])
            print(f"{step}: peer / ours = {peer / ours:.2f}x")
        cycle_ours = sum(statistics.median(r[s]["hold_ms"] for r in runs["ours"]) for s in STEPS)
        cycle_peer = sum(statistics.median(r[s]["hold_ms"] for r in runs["peer"]) for s in STEPS)
        print(
            f"cycle: {cycle_peer:.3f} -> {cycle_ours:.3f} ms held, {cycle_peer / cycle_ours:.2f}x"
        )


if __name__ == "__main__":
    main()
