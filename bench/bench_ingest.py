"""Trace ingest: events/s from several agent processes into one ledger (issue 17, goal 4).

Each writer is a real process. *Ours* builds ``TraceEvent``s the way ``RunTracer`` does and
hands each batch to ``ApprovalLedger.append_trace`` (secret redaction, canonical JSON payloads,
one transaction per batch, the retention's pruning cadence). The *peer* writes the same rows
with the bare driver (``sqlite3`` with the ledger's pragmas, or ``psycopg``): one
``executemany`` per batch in one transaction, ``json.dumps`` for the payload. Both write into a
ledger file made by our migrations (same table, same indexes); a run is ``--processes`` writers
started together, and rounds alternate which path runs first. Afterwards the rows are counted:
nothing may be missing.

    .venv/bin/python bench/bench_ingest.py                     # SQLite, then PostgreSQL
    .venv/bin/python bench/bench_ingest.py --quick --no-postgres
    .venv/bin/python bench/bench_ingest.py --batch 1 --events 2000

PostgreSQL is a throwaway durable cluster (``tests/support/postgres.py``, fsync and
synchronous_commit on), or the server given by ``--pg-url``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

_PEER_COLUMNS = (
    "at, agent_id, thread_id, run_id, kind, tool, outcome_status, reason_code, payload_json, "
    "blob_ref"
)


def _payload(n: int) -> dict[str, Any]:
    """What a tool-result event carries: the call's arguments, a result preview and timings."""
    return {
        "call_id": f"call_{n}",
        "arguments": {"sku": f"SKU-{n % 997}", "warehouse": "east"},
        "preview": {"sku": f"SKU-{n % 997}", "on_hand": n % 50, "reserved": 2},
        "latency_ms": 1.25,
        "n": n,
    }


def _kind(n: int) -> tuple[str, str | None, str | None]:
    kinds = (
        ("model_request", None, None),
        ("tool_call", "inventory_lookup", None),
        ("tool_result", "inventory_lookup", "success"),
        ("model_response", None, None),
    )
    return kinds[n % 4]


def writer(mode: str, url: str, count: int, batch: int, start_at: float, name: str) -> None:
    """Write ``count`` events in batches of ``batch``, starting at wall time ``start_at``."""
    if mode == "ours":
        from supervisor.ledger.models import TraceEvent
        from supervisor.store.provider import SQLModelProvider

        provider = SQLModelProvider(url)
        ledger = provider.ledger

        def write(first: int, size: int) -> None:
            events = []
            for n in range(first, first + size):
                kind, tool, status = _kind(n)
                events.append(
                    TraceEvent(
                        at=datetime.now(UTC),
                        agent_id=name,
                        thread_id=f"{name}-t",
                        run_id=f"{name}-r{n // 100}",
                        kind=kind,
                        tool=tool,
                        outcome_status=status,
                        payload=_payload(n),
                    )
                )
            ledger.append_trace(events)

        close = provider.close
    else:
        insert = f"INSERT INTO trace_event ({_PEER_COLUMNS}) VALUES ({{marks}})"

        def rows(first: int, size: int) -> list[tuple[Any, ...]]:
            out = []
            for n in range(first, first + size):
                kind, tool, status = _kind(n)
                out.append(
                    (
                        datetime.now(UTC).replace(tzinfo=None),
                        name,
                        f"{name}-t",
                        f"{name}-r{n // 100}",
                        kind,
                        tool,
                        status,
                        None,
                        json.dumps(_payload(n), sort_keys=True, separators=(",", ":")),
                        None,
                    )
                )
            return out

        if url.startswith("sqlite:///"):
            import sqlite3

            connection = sqlite3.connect(url[len("sqlite:///") :], isolation_level=None)
            close = connection.close
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("PRAGMA busy_timeout=30000")
            statement = insert.format(marks=", ".join("?" * 10))

            def write(first: int, size: int) -> None:
                values = rows(first, size)
                connection.execute("BEGIN IMMEDIATE")
                connection.executemany(statement, values)
                connection.execute("COMMIT")

        else:
            import psycopg

            dsn = url.replace("postgresql+psycopg://", "postgresql://")
            pg = psycopg.connect(dsn)
            statement = insert.format(marks=", ".join(["%s"] * 10))

            def write(first: int, size: int) -> None:
                values = rows(first, size)
                with pg.transaction(), pg.cursor() as cursor:
                    cursor.executemany(statement, values)

            close = pg.close
    time.sleep(max(0.0, start_at - time.time()))
    started = time.time()
    for first in range(0, count, batch):
        write(first, min(batch, count - first))
    ended = time.time()
    close()
    print(json.dumps({"started": started, "ended": ended, "written": count}), flush=True)


def _count(url: str) -> int:
    if url.startswith("sqlite:///"):
        import sqlite3

        with contextlib.closing(sqlite3.connect(url[len("sqlite:///") :])) as connection:
            return int(connection.execute("SELECT count(*) FROM trace_event").fetchone()[0])
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as connection:
        row = connection.execute("SELECT count(*) FROM trace_event").fetchone()
        return int(row[0]) if row else 0


def run_once(mode: str, url: str, processes: int, count: int, batch: int) -> dict[str, Any]:
    """``processes`` writers of ``count`` events each, started together; events/s overall."""
    before = _count(url)
    start_at = time.time() + 1.5  # every writer has imported and connected by then
    children = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--writer",
                mode,
                url,
                str(count),
                str(batch),
                repr(start_at),
                f"agent-{i}",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    reports = []
    for child in children:
        output, _ = child.communicate()
        if child.returncode != 0:
            raise RuntimeError(f"{mode} writer failed with {child.returncode}")
        reports.append(json.loads(output))
    elapsed = max(r["ended"] for r in reports) - min(r["started"] for r in reports)
    written = sum(r["written"] for r in reports)
    stored = _count(url) - before
    if stored != written:
        raise RuntimeError(f"{mode}: {written} events written, {stored} stored")
    return {"events_per_s": written / elapsed, "seconds": elapsed, "events": written}


@contextlib.contextmanager
def postgres_server(pg_url: str | None) -> Iterator[Any]:
    """A durable throwaway PostgreSQL cluster, or the server at ``pg_url``."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.postgres import PostgresCluster

    cluster = PostgresCluster(server_url=pg_url, fast=False)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _migrated(url: str) -> str:
    from supervisor.store.provider import SQLModelProvider

    provider = SQLModelProvider(url)
    provider.ledger  # noqa: B018 - brings the schema current
    provider.close()
    return url


def bench_engine(
    label: str, urls: dict[str, str], processes: int, count: int, batch: int, rounds: int
) -> dict[str, Any]:
    results: dict[str, list[float]] = {"ours": [], "peer": []}
    ratios = []
    for round_ in range(rounds):
        order = ("ours", "peer") if round_ % 2 == 0 else ("peer", "ours")
        figures = {mode: run_once(mode, urls[mode], processes, count, batch) for mode in order}
        for mode in order:
            results[mode].append(figures[mode]["events_per_s"])
        ratios.append(figures["ours"]["events_per_s"] / figures["peer"]["events_per_s"])
        print(
            f"  {label} round {round_ + 1}: ours {figures['ours']['events_per_s']:,.0f}/s, "
            f"peer {figures['peer']['events_per_s']:,.0f}/s  (load {os.getloadavg()[0]:.2f})",
            flush=True,
        )
    return {
        "ours": statistics.median(results["ours"]),
        "peer": statistics.median(results["peer"]),
        "ratio": statistics.median(ratios),
        "ratio_range": (min(ratios), max(ratios)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--events", type=int, default=25_000, help="per process per run")
    parser.add_argument("--batch", type=int, default=50, help="events per transaction")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a few seconds: 5,000 events, 1 round")
    parser.add_argument("--pg-url")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--writer", nargs=6, help="internal")
    options = parser.parse_args()
    if options.writer:
        mode, url, count, batch, start_at, name = options.writer
        writer(mode, url, int(count), int(batch), float(start_at), name)
        return
    if options.quick:
        options.events, options.rounds = 5_000, 1
    print(
        f"{options.processes} writer processes x {options.events:,} events, "
        f"{options.batch} events per transaction, {options.rounds} rounds",
        flush=True,
    )
    table: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as folder:
        ours = _migrated(f"sqlite:///{Path(folder) / 'ours.db'}")
        shutil.copy(Path(folder) / "ours.db", Path(folder) / "peer.db")
        urls = {"ours": ours, "peer": f"sqlite:///{Path(folder) / 'peer.db'}"}
        table.append(
            (
                "SQLite (WAL, NORMAL)",
                bench_engine(
                    "SQLite", urls, options.processes, options.events, options.batch, options.rounds
                ),
            )
        )
    if not options.no_postgres:
        with postgres_server(options.pg_url) as cluster:
            urls = {
                mode: _migrated(cluster.create_database(f"ingest_{mode}_{os.getpid()}"))
                for mode in ("ours", "peer")
            }
            table.append(
                (
                    "PostgreSQL (durable)",
                    bench_engine(
                        "PostgreSQL",
                        urls,
                        options.processes,
                        options.events,
                        options.batch,
                        options.rounds,
                    ),
                )
            )
    print()
    print("| ledger | ours events/s | peer events/s | ours / peer (median of rounds) |")
    print("|---|---:|---:|---:|")
    for label, figures in table:
        low, high = figures["ratio_range"]
        print(
            f"| {label} | {figures['ours']:,.0f} | {figures['peer']:,.0f} | "
            f"{figures['ratio']:.2f}x ({low:.2f}-{high:.2f}) |"
        )


if __name__ == "__main__":
    main()
