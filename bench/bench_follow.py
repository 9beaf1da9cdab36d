"""What following the change feed costs a process on a busy PostgreSQL ledger.

On a team's ledger every audited write notifies (``LISTEN``/``NOTIFY``), and a follower looks
at each notice it is sent to decide whether it wakes (``ApprovalLedger.follow``). Here this
process sends ``--rate`` notices a second as a team's writes send them: each proposal's
propose, approve, claim and complete in turn, each naming a record nobody here follows (as the
other agents' writes look to an agent waiting for its own approvals), on the channel the
tree's writers use (one per action since stop 32, one for all before). Meanwhile
``--followers`` processes follow one proposal's approvals with 50 ms waits, as the team bench's
agents do. Each follower reports its CPU seconds over the window and how many notices it
heard. The figures: follower CPU per notice sent and per notice heard. The same followers
with nobody writing give the idle cost of the wait loop, subtracted from both.
``--approvals-only``: every notice is an approval (what stop 31 measured; every tree hears
them all).

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


def follow(url: str, seconds: float) -> dict[str, float]:
    """One follower: follow approvals of one proposal for ``seconds``; CPU and notices heard."""
    from supervisor.store.provider import SQLModelProvider

    provider = SQLModelProvider(url)
    ledger = provider.ledger
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


_TEAM_ACTIONS = ("propose", "approve", "claim", "complete")


def _channel_of(tree: Path | None) -> Any:
    """How ``tree``'s writers pick a notice's channel: by action, or one channel for all."""
    from supervisor.store.notify import CHANNEL, notice_channel

    source = (tree or REPO) / "supervisor" / "store" / "notify.py"
    return notice_channel if "def notice_channel" in source.read_text() else lambda _: CHANNEL


def _round(tree: Path | None, url: str, followers: int, rate: float, seconds: float,
           actions: tuple[str, ...]) -> tuple[list[dict[str, float]], int]:  # fmt: skip
    """``followers`` follower processes of ``tree`` while this process notifies at ``rate``
    (``actions`` in turn; none: nobody notifies); what each reported, and the notices sent."""
    import psycopg

    from supervisor.store.notify import notice_payload

    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    channel_of = _channel_of(tree)
    args = [sys.executable, __file__, "--follow", url, "--seconds", str(seconds)]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
    procs = [
        subprocess.Popen(args, env=env, cwd=tree or REPO, **pipes)  # type: ignore[call-overload]
        for _ in range(followers)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    stop = threading.Event()
    sent = [0]

    def notify() -> None:
        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"),
                             autocommit=True) as writer:  # fmt: skip
            n, started = 0, time.monotonic()
            while not stop.is_set():
                action = actions[n % len(actions)]
                payload = notice_payload(10**9 + n, action, f"someone-else-{n // len(actions)}")
                writer.execute("SELECT pg_notify(%s, %s)", (channel_of(action), payload))
                n += 1
                time.sleep(max(0.0, started + n / rate - time.monotonic()))
            sent[0] = n

    writer = threading.Thread(target=notify)
    if actions:
        writer.start()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = [proc.communicate()[0] for proc in procs]
    stop.set()
    if actions:
        writer.join()
    return [json.loads(output.strip().splitlines()[-1]) for output in outputs], sent[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--followers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=400.0, help="notices/s")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--compare", type=Path, help="another checkout, measured alike")
    parser.add_argument("--pg-url")
    parser.add_argument("--approvals-only", action="store_true",
                        help="every notice an approval (of another proposal)")  # fmt: skip
    parser.add_argument("--follow", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.follow:
        print(json.dumps(follow(options.follow, options.seconds)))
        return
    actions = ("approve",) if options.approvals_only else _TEAM_ACTIONS
    sys.path.insert(0, str(REPO / "tests"))
    from support.postgres import PostgresCluster

    from supervisor.store.provider import SQLModelProvider

    trees: dict[str, Path | None] = {"ours": None}
    if options.compare is not None:
        trees["peer"] = options.compare
    per_notice: dict[str, list[float]] = {name: [] for name in trees}
    per_sent: dict[str, list[float]] = {name: [] for name in trees}
    heard_share: dict[str, list[float]] = {name: [] for name in trees}
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
                quiet, _ = _round(tree, url, options.followers, options.rate, options.seconds, ())
                busy, sent = _round(tree, url, options.followers, options.rate, options.seconds,
                                    actions)  # fmt: skip
                idle_cpu = statistics.mean(r["cpu_s"] for r in quiet)
                idle[name].append(idle_cpu / options.seconds)
                per_notice[name].extend(
                    (r["cpu_s"] - idle_cpu) / r["heard"] * 1e6 for r in busy if r["heard"]
                )
                per_sent[name].extend((r["cpu_s"] - idle_cpu) / sent * 1e6 for r in busy)
                heard_share[name].extend(r["heard"] / sent for r in busy)
    finally:
        cluster.stop()
    print(f"{options.followers} followers of approvals, {options.rate:.0f} notices/s "
          f"({', '.join(actions)} in turn) for {options.seconds:.0f} s, "
          f"{options.rounds} rounds")  # fmt: skip
    print("| tree | notices heard / sent | follower CPU per notice sent, us | per notice heard,"
          " us | idle wait loop, CPU share |")  # fmt: skip
    print("|---|---:|---:|---:|---:|")
    for name in trees:
        print(f"| {name} | {statistics.median(heard_share[name]):.2f} | "
              f"{statistics.median(per_sent[name]):.1f} | "
              f"{statistics.median(per_notice[name]):.1f} | "
              f"{statistics.median(idle[name]) * 100:.2f}% |")  # fmt: skip
    if "peer" in trees:
        ratio = statistics.median(per_sent["peer"]) / statistics.median(per_sent["ours"])
        print(f"\npeer / ours, follower CPU per notice sent: {ratio:.2f}x")


if __name__ == "__main__":
    main()
