"""What following the change feed costs a process on a busy PostgreSQL ledger.

On a team's ledger every audited write notifies every follower (``LISTEN``/``NOTIFY``), and a
follower looks at each notice to decide whether it wakes (``ApprovalLedger.follow``). Here one
writer process sends ``--rate`` notices a second, each naming a record nobody here follows
(as the other agents' writes look to an agent waiting for its own approvals), while
``--followers`` processes follow one proposal's approvals with 50 ms waits, as the team bench's
agents do. Each follower reports its CPU seconds over the window and how many notices it
heard; the figure is follower CPU per notice heard. A second run of the same followers on a
channel nobody writes to gives the idle cost of the wait loop, subtracted from both.

The peer is another checkout (``--compare DIR``, e.g. a ``git archive`` of an older main),
measured in the same rounds on the same server, in alternating order.

    .venv/bin/python bench/bench_follow.py --compare /tmp/base --rounds 3

PostgreSQL is a throwaway durable cluster (``tests/support/postgres.py``), or ``--pg-url``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def follow(url: str, seconds: float, quiet: bool) -> dict[str, float]:
    """One follower: follow approvals of one proposal for ``seconds``; CPU and notices heard.

    ``quiet``: listen on a channel nobody notifies (the wait loop's own cost)."""
    from supervisor.store.notify import ChangeBoard
    from supervisor.store.provider import SQLModelProvider

    provider = SQLModelProvider(url)
    ledger = provider.ledger
    if quiet:  # the process's change board listens where nobody notifies
        ledger._board = ChangeBoard(ledger.repository.change_probe("bench_follow_quiet"))
    page: Any = ledger.head()
    ledger.follow(page, 0, actions=("approve",), subjects=("mine",))  # opens the listener
    board = ledger._get_board()
    print("ready", flush=True)
    sys.stdin.readline()
    heard, cpu = board.mark(), time.process_time()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        page = ledger.follow(page, 0.05, actions=("approve",), subjects=("mine",))
    result = {"cpu_s": time.process_time() - cpu, "heard": board.mark() - heard}
    provider.close()
    return result


def _round(tree: Path | None, url: str, followers: int, rate: float, seconds: float,
           quiet: bool) -> list[dict[str, float]]:  # fmt: skip
    """``followers`` follower processes of ``tree`` while this process notifies at ``rate``."""
    import psycopg

    from supervisor.store.notify import CHANNEL, notice_payload

    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    args = [sys.executable, __file__, "--follow", url, "--seconds", str(seconds)]
    if quiet:
        args.append("--quiet")
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
    procs = [
        subprocess.Popen(args, env=env, cwd=tree or REPO, **pipes)  # type: ignore[call-overload]
        for _ in range(followers)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    stop = threading.Event()

    def notify() -> None:
        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"),
                             autocommit=True) as writer:  # fmt: skip
            n, started = 0, time.monotonic()
            while not stop.is_set():
                payload = notice_payload(10**9 + n, "approve", f"someone-else-{n}")
                writer.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
                n += 1
                time.sleep(max(0.0, started + n / rate - time.monotonic()))

    writer = threading.Thread(target=notify)
    writer.start()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = [proc.communicate()[0] for proc in procs]
    stop.set()
    writer.join()
    return [json.loads(output.strip().splitlines()[-1]) for output in outputs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--followers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=400.0, help="notices/s")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--compare", type=Path, help="another checkout, measured alike")
    parser.add_argument("--pg-url")
    parser.add_argument("--follow", help=argparse.SUPPRESS)
    parser.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.follow:
        print(json.dumps(follow(options.follow, options.seconds, options.quiet)))
        return
    sys.path.insert(0, str(REPO / "tests"))
    from support.postgres import PostgresCluster

    from supervisor.store.provider import SQLModelProvider

    trees: dict[str, Path | None] = {"ours": None}
    if options.compare is not None:
        trees["peer"] = options.compare
    per_notice: dict[str, list[float]] = {name: [] for name in trees}
    idle: dict[str, list[float]] = {name: [] for name in trees}
    cluster = PostgresCluster(server_url=options.pg_url, fast=False)
    cluster.start()
    try:
        url = cluster.create_database("bench_follow")
        SQLModelProvider(url).close()  # the schema
        for round_index in range(options.rounds):
            order = list(trees.items())
            if round_index % 2:
                order.reverse()
            for name, tree in order:
                quiet = _round(tree, url, options.followers, options.rate, options.seconds, True)
                busy = _round(tree, url, options.followers, options.rate, options.seconds, False)
                idle_cpu = statistics.mean(r["cpu_s"] for r in quiet)
                idle[name].append(idle_cpu / options.seconds)
                per_notice[name].extend(
                    (r["cpu_s"] - idle_cpu) / r["heard"] * 1e6 for r in busy if r["heard"]
                )
    finally:
        cluster.stop()
    print(f"{options.followers} followers, {options.rate:.0f} notices/s for "
          f"{options.seconds:.0f} s, {options.rounds} rounds")  # fmt: skip
    print("| tree | follower CPU per notice heard, us (median) | idle wait loop, CPU share |")
    print("|---|---:|---:|")
    for name in trees:
        print(f"| {name} | {statistics.median(per_notice[name]):.1f} | "
              f"{statistics.median(idle[name]) * 100:.2f}% |")  # fmt: skip
    if "peer" in trees:
        ratio = statistics.median(per_notice["peer"]) / statistics.median(per_notice["ours"])
        print(f"\npeer / ours, CPU per notice: {ratio:.2f}x")


if __name__ == "__main__":
    main()
