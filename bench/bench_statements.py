"""What the PostgreSQL server receives per approval cycle, counted from its own statement log.

One process runs propose -> approve -> claim -> complete cycles on a throwaway cluster started
with ``log_statement=all``; the statements logged between two markers are grouped by their
first words and divided by the number of cycles. Pool pings, ``BEGIN`` and ``COMMIT`` are
statements the server sees like any other, so this counts what client-side hooks miss. The
peer is another checkout (``--compare DIR``, e.g. a ``git archive`` of main), run alike.

    .venv/bin/python bench/bench_statements.py --compare /tmp/base
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
START, END = "bench-statements-start", "bench-statements-end"


def measure(url: str, cycles: int) -> None:
    """Run the cycles on ``url`` (warmed up first), with markers the log shows around them."""
    import sqlalchemy as sa

    from supervisor.ledger.service import ApprovalLedger
    from supervisor.store.engine import create_ledger_engine

    engine = create_ledger_engine(url)
    ledger = ApprovalLedger(engine)

    def cycles_of(count: int) -> None:
        for index in range(count):
            made = ledger.propose("refund", "0" * 64, {"customer": f"c-{index}"})
            approved = ledger.approve(made.proposal_id, "alice", "ok")
            ledger.claim(made.proposal_id, approved.args_hash, "worker")
            ledger.complete(made.proposal_id, "success")

    cycles_of(20)
    marker = sa.create_engine(url, poolclass=sa.NullPool)
    with marker.connect() as connection:
        connection.exec_driver_sql(f"SELECT '{START}'")
    cycles_of(cycles)
    with marker.connect() as connection:
        connection.exec_driver_sql(f"SELECT '{END}'")
    marker.dispose()
    ledger.close()
    engine.dispose()


def counted(log: str, cycles: int) -> dict[str, float]:
    """Statements per cycle between the markers, by their first words."""
    part = log[log.index(START) : log.index(END)]
    statements = re.findall(r"LOG:  (?:statement|execute [^:]*): (.*)", part)
    kinds: collections.Counter[str] = collections.Counter()
    for statement in statements[1:]:  # the first is the start marker itself
        words = statement.strip().split()
        key = " ".join(words[:3])[:48] if words else "(empty)"
        kinds["(empty: a pool ping)" if key in (";", "") else key] += 1
    return {kind: count / cycles for kind, count in kinds.most_common()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--compare", type=Path, help="another checkout, measured alike")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.measure:
        measure(options.measure, options.cycles)
        return
    sys.path.insert(0, str(REPO / "tests"))
    from support.postgres import PostgresCluster

    trees: dict[str, Path | None] = {"ours": None}
    if options.compare is not None:
        trees["peer"] = options.compare
    results: dict[str, dict[str, float]] = {}
    for name, tree in trees.items():
        cluster = PostgresCluster(fast=False, settings={"log_statement": "all"})
        cluster.start()
        try:
            url = cluster.create_database(f"statements_{name}")
            env = dict(os.environ)
            if tree is not None:
                env["PYTHONPATH"] = str(tree)
            subprocess.run(
                [sys.executable, __file__, "--measure", url, "--cycles", str(options.cycles)],
                env=env, check=True, cwd=tree or REPO,
            )  # fmt: skip
            assert cluster.data_dir is not None
            log = (cluster.data_dir.parent / "server.log").read_text(errors="replace")
            results[name] = counted(log, options.cycles)
        finally:
            cluster.stop()
    kinds = list(dict.fromkeys(kind for result in results.values() for kind in result))
    print("| statement | " + " | ".join(trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for kind in kinds:
        row = " | ".join(f"{results[name].get(kind, 0.0):.2f}" for name in trees)
        print(f"| `{kind}` | {row} |")
    totals = " | ".join(f"**{sum(results[name].values()):.2f}**" for name in trees)
    print(f"| all, per cycle | {totals} |")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
