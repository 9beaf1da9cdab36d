"""What each listening connection costs the PostgreSQL server when others notify.

On PostgreSQL 15 a transaction that sends a ``NOTIFY`` signals, at its commit, every backend of
the database that listens on any channel, whichever channel it listens on: each wakes, reads
the notification queue and skips what it does not listen on. So every process that follows a
team's ledger (one ``LISTEN`` connection each) adds to the server's cost of every audited
write, even a process that is not sent the notice. Here one connection sends ``--rate``
notifications a second to a channel nobody listens on while ``--listeners`` idle connections
listen on another; the figure is the server's CPU (all backends involved, from ``/proc``) per
notification. The peer is the same run with no listener, in the same rounds on the same server.

    .venv/bin/python bench/bench_listeners.py --listeners 16 --rounds 3

PostgreSQL is a throwaway durable cluster (``tests/support/postgres.py``), or ``--pg-url`` (its
backends must run on this machine, for ``/proc``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def server_cpu_per_notify(url: str, listeners: int, rate: float, seconds: float) -> float:
    """Microseconds of server CPU per notification with ``listeners`` idle listeners."""
    import psycopg

    connections: list[Any] = []
    try:
        for _ in range(listeners):
            connection = psycopg.connect(url, autocommit=True)
            connection.execute("LISTEN bench_listeners_elsewhere")
            connections.append(connection)
        writer = psycopg.connect(url, autocommit=True)
        connections.append(writer)
        pids = [connection.info.backend_pid for connection in connections]
        writer.execute("SELECT pg_notify('bench_listeners_busy', 'warm-up')")
        time.sleep(0.2)
        began, sent = _cpu_seconds(pids), 0
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            writer.execute("SELECT pg_notify('bench_listeners_busy', %s)", (str(sent),))
            sent += 1
            time.sleep(max(0.0, started + sent / rate - time.monotonic()))
        time.sleep(0.2)  # the last signals handled
        return (_cpu_seconds(pids) - began) / sent * 1e6
    finally:
        for connection in connections:
            connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listeners", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=400.0, help="notifications/s")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--pg-url")
    options = parser.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    from support.postgres import PostgresCluster

    cluster = PostgresCluster(server_url=options.pg_url, fast=False)
    cluster.start()
    figures: dict[int, list[float]] = {0: [], options.listeners: []}
    try:
        url = cluster.create_database("bench_listeners")
        url = url.replace("postgresql+psycopg://", "postgresql://")
        for round_index in range(options.rounds):
            order = sorted(figures, reverse=bool(round_index % 2))
            for count in order:
                figures[count].append(
                    server_cpu_per_notify(url, count, options.rate, options.seconds)
                )
    finally:
        cluster.stop()
    peer, ours = statistics.median(figures[0]), statistics.median(figures[options.listeners])
    print(f"{options.rate:.0f} notifications/s for {options.seconds:.0f} s, "
          f"{options.rounds} rounds (median)")  # fmt: skip
    print("| listening connections (elsewhere) | server CPU per notification, us |")
    print("|---:|---:|")
    print(f"| 0 (peer) | {peer:.0f} |")
    print(f"| {options.listeners} | {ours:.0f} |")
    per_listener = (ours - peer) / options.listeners if options.listeners else 0.0
    print(f"\n{ours / peer:.1f}x the peer; {per_listener:.1f} us per listener per notification")


if __name__ == "__main__":
    main()
