"""Approval ledger throughput and inbox latency, each against a bare peer in the same run.

Measures (DESIGN §8, issue 3):

1. propose -> approve -> claim -> complete cycles per second with p50/p95 per cycle, on SQLite
   (synchronous NORMAL and FULL) and PostgreSQL. Peer: the same row writes (proposal INSERT,
   three conditional UPDATEs, the execution INSERT/UPDATE) as bare SQL on the same schema, with
   no audit chain, canonical JSON, validation or ORM: once with a commit per step (the ledger's
   durability points) and, on SQLite, once as a single transaction per cycle.
2. First page of 10k pending: ``ledger.list(status="pending", limit=50)`` on a ledger holding
   10k pending proposals, warm. Peer: the same indexed SELECT through bare sqlite3 / psycopg.
3. Open a ledger of 100k proposals (10k pending) and fetch the first pending page: a fresh
   ``SQLModelProvider`` (new engine, schema check) each time, in-process; and a fresh Python
   process end to end (interpreter start + imports + open + page). Peer: bare connect + SELECT.

PostgreSQL is a throwaway cluster (``tests/support/postgres.py``) with durable settings (fsync
and synchronous_commit on), or the server given by ``--pg-url``; ``--no-postgres`` skips it.
The page fixtures are seeded by bulk INSERT of proposal rows built from domain ``Proposal``
objects (no audit rows: listing and opening never read them).

Run: .venv/bin/python bench/bench_ledger.py [--cycles 300] [--rounds 3] [--pg-url URL]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parents[1]
PAGE = 50
ARGUMENTS = {"name": "Ada Lovelace", "email": "ada@example.com", "plan": "pro", "seats": 3}
Synchronous = Literal["NORMAL", "FULL"]


# --- measurement helpers ------------------------------------------------------------------


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``samples`` (nearest rank)."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


@dataclass
class Series:
    """Per-operation latencies (seconds) of one measured path."""

    label: str
    samples: list[float]

    @property
    def per_second(self) -> float:
        return len(self.samples) / sum(self.samples)

    def ms(self, fraction: float) -> float:
        return percentile(self.samples, fraction) * 1000


def timed(operation: Callable[[], object], count: int) -> list[float]:
    """Run ``operation`` ``count`` times; return each run's wall time."""
    samples: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        operation()
        samples.append(time.perf_counter() - started)
    return samples


# --- engines ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One ledger to measure: a SQLAlchemy URL and, for SQLite, its durability level."""

    label: str
    url: str
    synchronous: Synchronous | None = None

    @property
    def sqlite_file(self) -> Path | None:
        prefix = "sqlite:///"
        return Path(self.url[len(prefix) :]) if self.url.startswith(prefix) else None


def open_ledger(target: Target) -> Any:
    """A fresh provider on ``target`` (schema brought current)."""
    from supervisor.store.provider import SQLModelProvider

    provider = SQLModelProvider(target.url, synchronous=target.synchronous)
    provider.ledger  # noqa: B018 - opens the engine and checks the schema
    return provider


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


# --- 1. approval cycles -------------------------------------------------------------------


def ledger_cycle(ledger: Any) -> Callable[[], None]:
    """One full propose -> approve -> claim -> complete cycle through the ledger service."""

    def cycle() -> None:
        proposal = ledger.propose(
            "create_customer", "schema-v1", ARGUMENTS, owner="bench-agent",
            thread_id="bench", policy_reason="creates a customer", domains=("crm",),
        )  # fmt: skip
        ledger.approve(proposal.proposal_id, "op@example.com", "ok", via="cli")
        ledger.claim(proposal.proposal_id, proposal.args_hash, executor="bench")
        ledger.complete(proposal.proposal_id, "success", executor="bench")

    return cycle


_PEER_STEPS = (
    (
        "INSERT INTO proposal (id, tool_name, tool_schema_hash, arguments_json, args_hash,"
        " target_json, policy_reason, owner, thread_id, domains_json, status, created_at,"
        " updated_at, expires_at) VALUES ({p}, 'create_customer', 'schema-v1', {p}, {p}, '{{}}',"
        " 'creates a customer', 'bench-agent', 'bench', '[\"crm\"]', 'pending', {p}, {p}, {p})",
        "INSERT INTO proposal_domain (proposal_id, domain) VALUES ({p}, 'crm')",
        "INSERT INTO proposal_open (proposal_id, created_at, expires_at) VALUES ({p}, {p}, {p})",
    ),
    (
        "UPDATE proposal SET status = 'approved', decided_at = {p}, updated_at = {p},"
        " approver_id = 'op@example.com', decision_reason = 'ok' WHERE id = {p}"
        " AND status = 'pending'",
    ),
    (
        "UPDATE proposal SET status = 'executing', updated_at = {p} WHERE id = {p}"
        " AND status = 'approved' AND args_hash = {p} AND expires_at > {p}",
        "INSERT INTO execution (proposal_id, state, executor_id, executor_pid, executor_host,"
        " args_hash, started_at) VALUES ({p}, 'executing', 'bench', 1, 'host', {p}, {p})",
    ),
    (
        "UPDATE proposal SET status = 'executed', updated_at = {p} WHERE id = {p}"
        " AND status = 'executing'",
        "UPDATE execution SET state = 'executed', finished_at = {p}, outcome_status = 'success'"
        " WHERE proposal_id = {p} AND state = 'executing'",
        "DELETE FROM proposal_open WHERE proposal_id = {p}",
    ),
)


def _peer_params(proposal_id: str, now: Any, later: Any) -> tuple[tuple[tuple[Any, ...], ...], ...]:
    args_json, args_hash = json.dumps(ARGUMENTS, sort_keys=True), uuid.uuid4().hex * 2
    return (
        (
            (proposal_id, args_json, args_hash, now, now, later),
            (proposal_id,),
            (proposal_id, now, later),
        ),
        ((now, now, proposal_id),),
        ((now, proposal_id, args_hash, now), (proposal_id, args_hash, now)),
        ((now, proposal_id), (now, proposal_id), (proposal_id,)),
    )


def sqlite_peer_cycle(path: Path, synchronous: Synchronous, *, one_transaction: bool) -> Any:
    """The same row writes as a cycle through bare sqlite3 (WAL, same ``synchronous``)."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute(f"PRAGMA synchronous = {synchronous}")
    steps = [[sql.format(p="?") for sql in step] for step in _PEER_STEPS]

    def cycle() -> None:
        now = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
        later = (datetime.now(UTC) + timedelta(days=1)).replace(tzinfo=None).isoformat(sep=" ")
        params = _peer_params(uuid.uuid4().hex, now, later)
        if one_transaction:
            connection.execute("BEGIN IMMEDIATE")
        for statements, values in zip(steps, params, strict=True):
            if not one_transaction:
                connection.execute("BEGIN IMMEDIATE")
            for statement, row in zip(statements, values, strict=True):
                assert connection.execute(statement, row).rowcount == 1
            if not one_transaction:
                connection.execute("COMMIT")
        if one_transaction:
            connection.execute("COMMIT")

    return cycle, connection


def postgres_peer_cycle(url: str) -> Any:
    """The same row writes as a cycle through bare psycopg, one commit per step."""
    connection = bare_connect(Target("peer", url))
    steps = [[sql.format(p="%s") for sql in step] for step in _PEER_STEPS]

    def cycle() -> None:
        now = datetime.now(UTC)
        params = _peer_params(uuid.uuid4().hex, now, now + timedelta(days=1))
        for statements, values in zip(steps, params, strict=True):
            with connection.transaction():
                for statement, row in zip(statements, values, strict=True):
                    assert connection.execute(statement, row).rowcount == 1

    return cycle, connection


def bench_cycles(targets: Sequence[Target], cycles: int, rounds: int) -> list[Series]:
    """Ledger and peer cycles per target, interleaved round by round."""
    series: dict[str, Series] = {}
    opened: list[tuple[Target, Any, list[tuple[str, Callable[[], None]]], list[Any]]] = []
    for target in targets:
        provider = open_ledger(target)
        paths: list[tuple[str, Callable[[], None]]] = [
            (f"ledger, {target.label}", ledger_cycle(provider.ledger))
        ]
        closers: list[Any] = [provider]
        peer_file = target.sqlite_file
        if peer_file is not None and target.synchronous is not None:
            peer_path = peer_file.with_name(peer_file.stem + "-peer.db")
            open_ledger(Target("peer schema", f"sqlite:///{peer_path}")).close()
            for one in (False, True):
                cycle, connection = sqlite_peer_cycle(
                    peer_path, target.synchronous, one_transaction=one
                )
                name = "1 tx/cycle" if one else "4 tx/cycle"
                paths.append((f"peer: bare sqlite3, {target.label}, {name}", cycle))
                closers.append(connection)
        elif peer_file is None:
            cycle, connection = postgres_peer_cycle(target.url)
            paths.append((f"peer: bare psycopg, {target.label}, 4 tx/cycle", cycle))
            closers.append(connection)
        opened.append((target, provider, paths, closers))
    try:
        for path_list in (paths for _, _, paths, _ in opened):
            for _label, cycle in path_list:
                timed(cycle, max(10, cycles // 10))  # warm-up
        for _ in range(rounds):
            for _, _, paths, _ in opened:
                for label, cycle in paths:
                    series.setdefault(label, Series(label, [])).samples.extend(timed(cycle, cycles))
    finally:
        for _, _, _, closers in opened:
            for closer in closers:
                closer.close()
    return list(series.values())


# --- 2 and 3. inbox pages -----------------------------------------------------------------


def seed(target: Target, total: int, pending: int) -> None:
    """Bulk-insert ``total`` proposals of which ``pending`` are pending, spread over time."""
    import sqlalchemy as sa
    from sqlmodel import SQLModel

    from supervisor.canonical import args_hash
    from supervisor.ledger.models import Proposal, ProposalStatus
    from supervisor.store.convert import open_values, proposal_to_row
    from supervisor.store.tables import ProposalOpenRow, ProposalRow

    provider = open_ledger(target)
    table = SQLModel.metadata.tables[ProposalRow.__tablename__]
    open_table = SQLModel.metadata.tables[ProposalOpenRow.__tablename__]
    others = [ProposalStatus.EXECUTED] * 6 + [
        ProposalStatus.REJECTED, ProposalStatus.EXPIRED, ProposalStatus.CANCELLED,
        ProposalStatus.FAILED,
    ]  # fmt: skip
    statuses = [ProposalStatus.PENDING] * pending + [
        others[i % len(others)] for i in range(total - pending)
    ]
    random.Random(7).shuffle(statuses)
    start = datetime.now(UTC) - timedelta(days=30)
    digest = args_hash("create_customer", "schema-v1", ARGUMENTS, {})
    try:
        with provider.engine.begin() as connection:
            batch: list[dict[str, Any]] = []
            opened: list[dict[str, Any]] = []
            for index, status in enumerate(statuses):
                created = start + timedelta(seconds=index * 20)
                proposal = Proposal(
                    proposal_id=uuid.uuid4().hex, tool_name="create_customer",
                    tool_schema_hash="schema-v1", arguments=ARGUMENTS, args_hash=digest,
                    execution_target={}, policy_reason="creates a customer",
                    owner=f"agent-{index % 20}", thread_id=f"thread-{index % 500}",
                    domains=("crm",), status=status, created_at=created, updated_at=created,
                    expires_at=created + timedelta(days=365),
                )  # fmt: skip
                batch.append(proposal_to_row(proposal).model_dump())
                row = open_values(proposal)
                if row is not None:
                    opened.append(row)
                if len(batch) == 5000:
                    connection.execute(sa.insert(table), batch)
                    batch = []
            if batch:
                connection.execute(sa.insert(table), batch)
            if opened:
                connection.execute(sa.insert(open_table), opened)
            if provider.engine.dialect.name == "sqlite":
                connection.exec_driver_sql("ANALYZE")
        if provider.engine.dialect.name == "postgresql":
            with provider.engine.connect() as connection:
                connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM ANALYZE proposal"
                )
    finally:
        provider.close()


_PEER_PAGE = (
    "SELECT p.* FROM proposal_open o JOIN proposal p ON p.id = o.proposal_id"
    f" WHERE p.status = 'pending' ORDER BY o.created_at, o.proposal_id LIMIT {PAGE + 1}"
)


def bare_connect(target: Target) -> Any:
    """A new bare driver connection (sqlite3 or autocommit psycopg) to ``target``."""
    sqlite_file = target.sqlite_file
    if sqlite_file is not None:
        return sqlite3.connect(sqlite_file)
    import psycopg
    from sqlalchemy.engine import make_url

    parsed = make_url(target.url)
    return psycopg.connect(
        host=parsed.host, port=parsed.port, user=parsed.username, dbname=parsed.database,
        password=parsed.password, autocommit=True,
    )  # fmt: skip


def peer_first_page(target: Target, *, fresh: bool) -> Callable[[], object]:
    """The same first-page query through a bare driver: on one open connection, or on a
    fresh connection each call (closed after) when ``fresh``."""
    connect = functools.partial(bare_connect, target)
    kept = None if fresh else connect()

    def page() -> object:
        connection = kept or connect()
        try:
            rows = connection.execute(_PEER_PAGE).fetchall()
        finally:
            if kept is None:
                connection.close()
        assert len(rows) == PAGE + 1
        return rows

    return page


def bench_first_page(target: Target, repeats: int) -> list[Series]:
    """Warm first page of pending through the ledger, and the bare query on one connection."""
    provider = open_ledger(target)
    try:
        ledger = provider.ledger

        def page() -> None:
            assert len(ledger.list(status="pending", limit=PAGE).items) == PAGE

        timed(page, 10)
        ours = Series(f"ledger.list first page, {target.label}", timed(page, repeats))
    finally:
        provider.close()
    peer = peer_first_page(target, fresh=False)
    timed(peer, 10)
    return [
        ours,
        Series(f"peer: bare SELECT on an open connection, {target.label}", timed(peer, repeats)),
    ]


def open_and_page(target: Target) -> None:
    """A fresh provider: open the ledger (engine + schema check) and fetch the first page."""
    provider = open_ledger(target)
    try:
        assert len(provider.ledger.list(status="pending", limit=PAGE).items) == PAGE
    finally:
        provider.close()


def probe(url: str) -> None:
    """``--probe``: in a brand-new process, time the imports and the open + first page."""
    started = time.perf_counter()
    from supervisor.store.provider import SQLModelProvider

    imported = time.perf_counter()
    provider = SQLModelProvider(url)
    items = provider.ledger.list(status="pending", limit=PAGE).items
    paged = time.perf_counter()
    provider.close()
    assert len(items) == PAGE
    print(json.dumps({"import_s": imported - started, "open_page_s": paged - imported}))


def bench_open(target: Target, repeats: int, processes: int) -> list[Series]:
    """Fresh-provider open + first page, fresh-process end to end, and the bare peer."""
    in_process = Series(
        f"fresh provider open + first page, {target.label}",
        timed(lambda: open_and_page(target), repeats),
    )
    wall: list[float] = []
    imports: list[float] = []
    inside: list[float] = []
    for _ in range(processes):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, "--probe", target.url],
            capture_output=True, text=True, check=True, cwd=REPO,
        )  # fmt: skip
        wall.append(time.perf_counter() - started)
        timings = json.loads(done.stdout.strip().splitlines()[-1])
        imports.append(timings["import_s"])
        inside.append(timings["open_page_s"])
    return [
        in_process,
        Series(f"new process: import supervisor.store.provider, {target.label}", imports),
        Series(f"new process: open + first page (after imports), {target.label}", inside),
        Series(f"new process: spawn to exit, end to end, {target.label}", wall),
        Series(
            f"peer: fresh bare connection + SELECT, {target.label}",
            timed(peer_first_page(target, fresh=True), repeats),
        ),
    ]


# --- report -------------------------------------------------------------------------------


def print_cycles(rows: Sequence[Series]) -> None:
    print("\n| path | cycles/s | p50 ms/cycle | p95 ms/cycle | n |")
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row.label} | {row.per_second:,.0f} | {row.ms(0.5):.2f} | {row.ms(0.95):.2f} "
            f"| {len(row.samples)} |"
        )
    ledgers = {
        row.label.removeprefix("ledger, "): row for row in rows if row.label.startswith("ledger")
    }
    print("\n| engine | ledger / peer (4 tx/cycle), p50 | ledger / peer (1 tx/cycle), p50 |")
    print("|---|---:|---:|")
    for label, ours in ledgers.items():
        ratios = []
        for kind in ("4 tx/cycle", "1 tx/cycle"):
            peer = next((r for r in rows if r.label.startswith("peer") and label in r.label
                         and r.label.endswith(kind)), None)  # fmt: skip
            ratios.append(f"{ours.ms(0.5) / peer.ms(0.5):.1f}x" if peer else "n/a")
        print(f"| {label} | {ratios[0]} | {ratios[1]} |")


def print_latency(title: str, rows: Sequence[Series]) -> None:
    print(f"\n{title}\n\n| path | p50 ms | p95 ms | n |\n|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row.label} | {row.ms(0.5):.2f} | {row.ms(0.95):.2f} | {len(row.samples)} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=300, help="cycles per path per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--total", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=200, help="first-page repeats")
    parser.add_argument("--opens", type=int, default=30, help="fresh-provider opens")
    parser.add_argument("--processes", type=int, default=5, help="fresh-process opens")
    parser.add_argument("--pg-url", help="an existing PostgreSQL server instead of a cluster")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.probe:
        probe(options.probe)
        return

    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ledger-")))
        targets = [
            Target("SQLite NORMAL", f"sqlite:///{work / 'normal.db'}", "NORMAL"),
            Target("SQLite FULL", f"sqlite:///{work / 'full.db'}", "FULL"),
        ]
        page_targets = {"SQLite": Target("SQLite", f"sqlite:///{work / 'pending10k.db'}")}
        open_targets = {"SQLite": Target("SQLite", f"sqlite:///{work / 'ledger100k.db'}")}
        if not options.no_postgres:
            cluster = stack.enter_context(postgres_server(options.pg_url))
            names = [f"bench_ledger_{kind}_{uuid.uuid4().hex[:8]}" for kind in ("c", "p", "o")]
            urls = [cluster.create_database(name) for name in names]
            stack.callback(lambda: [cluster.drop_database(name) for name in names])
            targets.append(Target("PostgreSQL", urls[0]))
            page_targets["PostgreSQL"] = Target("PostgreSQL", urls[1])
            open_targets["PostgreSQL"] = Target("PostgreSQL", urls[2])

        print(f"Python {sys.version.split()[0]}; cycles {options.cycles} x {options.rounds} rounds")
        print_cycles(bench_cycles(targets, options.cycles, options.rounds))

        page_rows: list[Series] = []
        for target in page_targets.values():
            seed(target, options.pending, options.pending)
            page_rows += bench_first_page(target, options.repeats)
        print_latency(f"First page ({PAGE}) of {options.pending:,} pending, warm", page_rows)

        open_rows: list[Series] = []
        for target in open_targets.values():
            seed(target, options.total, options.pending)
            open_rows += bench_open(target, options.opens, options.processes)
        print_latency(
            f"Open a ledger of {options.total:,} proposals ({options.pending:,} pending) and "
            f"fetch the first pending page",
            open_rows,
        )


if __name__ == "__main__":
    main()
