"""Team scale on PostgreSQL: 16 processes share one ledger (issue 17, goal 5).

Roles, each a real process on one PostgreSQL server (a throwaway durable cluster from
``tests/support/postgres.py``, fsync and synchronous_commit on, or ``--pg-url``):

* 12 **agents** propose at a paced aggregate ``--rate`` (proposals/s). Each follows the
  approvals of its own proposals on the ledger's change feed (``follow``: LISTEN/NOTIFY;
  ``--full-feed``: the whole feed, ``wait_for_change``) and, when one of its proposals is
  approved, claims it (``claim`` with the approved arguments' hash) and completes it.
* 2 **approvers** follow the feed and approve what is proposed, as two operators would. Each
  takes its half of the proposals, and both go for every tenth one (a decided race: one
  wins, the other gets ``approval_already_decided``).
* 2 **racers** stand for a second executor of the same work (a restarted agent, a duplicate
  worker): they try to claim every tenth approved proposal as soon as they see it, racing the
  owning agent. Exactly one claim may win; the loser gets a typed refusal.

Afterwards the database is read directly: no proposal may have two executions, every approved
proposal must have been executed, and the counts must add up. Meanwhile this process runs the
real supervisor TUI headless against the same ledger and times a key press until the inbox
cursor has moved (``tui_probe``), against the same on the idle ledger before the load. The
peer, measured in the same run on the same server before the load: the same four steps' row
writes as bare ``psycopg`` SQL (``bench_ledger.py``'s peer), one commit per step, in one
process.

    .venv/bin/python bench/bench_team.py                 # 5 minutes at 200 proposals/s
    .venv/bin/python bench/bench_team.py --quick         # 15 s, for ``make bench``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

AGENTS, APPROVERS, RACERS = 12, 2, 2


def _pct(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _bucket(proposal_id: str, modulo: int) -> int:
    return zlib.crc32(proposal_id.encode()) % modulo


def _timed(samples: dict[str, list[float]], name: str, started: float) -> None:
    samples.setdefault(name, []).append((time.perf_counter() - started) * 1000)


def role(
    kind: str, index: int, url: str, rate: float, seconds: float, full_feed: bool,
    approve_each: bool,
) -> None:  # fmt: skip
    """One process of the team; prints its samples and counters as JSON when done.

    Once imported and connected it prints ``ready`` and reads the common start time (epoch
    seconds) from stdin, so no process's start-up eats into another's measured window.
    """
    from supervisor.ledger.errors import LedgerBusy, LedgerError, LedgerUnavailable
    from supervisor.ledger.feed import FeedPage
    from supervisor.store.provider import SQLModelProvider

    provider = SQLModelProvider(url)
    ledger = provider.ledger
    cursor = ledger.head()
    samples: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    mine: dict[str, str] = {}  # agent: proposal id -> args hash
    name = f"{kind}-{index}"

    def count(key: str, by: int = 1) -> None:
        counts[key] = counts.get(key, 0) + by

    read_feed = ledger.events_since

    def counted_events_since(cursor: int = 0, limit: int = 500) -> list[Any]:
        records = read_feed(cursor, limit)
        count("feed_reads")
        count("feed_rows", len(records))
        return records

    ledger.events_since = counted_events_since  # type: ignore[method-assign]
    read_matching = ledger._read_matching

    def counted_read_matching(*args: Any) -> tuple[list[Any], int, bool]:
        records, through, caught_up = read_matching(*args)
        count("feed_reads")
        count("feed_rows", len(records))
        return records, through, caught_up

    ledger._read_matching = counted_read_matching  # type: ignore[method-assign,assignment]
    # What each role follows (``follow``); ``--full-feed``: every role reads the whole feed.
    interests: dict[str, dict[str, Any]] = {
        "agent": {"actions": ("approve",), "subjects": mine},
        "approver": {"actions": ("propose",)},
        "racer": {"actions": ("approve",)},
    }
    interest = interests[kind]

    def execute(proposal_id: str, args_hash: str, approved_at: datetime) -> None:
        started = time.perf_counter()
        try:
            ledger.claim(proposal_id, args_hash, executor=name)
        except (LedgerBusy, LedgerUnavailable):
            count("claim_transient")
            raise
        except LedgerError as error:
            _timed(samples, "claim_refused", started)
            count(f"claim_refused:{error.code}")
            return
        _timed(samples, "claim", started)
        samples.setdefault("approved_to_claimed", []).append(
            (datetime.now(UTC) - approved_at).total_seconds() * 1000
        )
        count("claimed")
        started = time.perf_counter()
        ledger.complete(proposal_id, "success", executor=name)
        _timed(samples, "complete", started)

    interval = AGENTS / rate if kind == "agent" else 0.0
    print("ready", flush=True)
    start_at = float(sys.stdin.readline())
    time.sleep(max(0.0, start_at - time.time()))
    began, cpu_began = time.monotonic(), time.process_time()
    next_at = began + (index / AGENTS) * interval if kind == "agent" else float("inf")
    stop_proposing = began + seconds
    drain_until = stop_proposing + 10.0
    n = 0
    page: FeedPage | None = None
    while True:
        now = time.monotonic()
        if now >= drain_until or (kind == "agent" and now >= stop_proposing and not mine):
            break
        if kind != "agent" and now >= stop_proposing + 5.0:
            break
        if kind == "agent" and now < stop_proposing and now >= next_at:
            started = time.perf_counter()
            proposal = ledger.propose(
                "create_customer", "schema-v1",
                {"name": f"customer {index}-{n}", "email": f"c{index}-{n}@example.com"},
                owner=name, thread_id=f"{name}-thread", policy_reason="creates a customer",
                domains=("crm",),
            )  # fmt: skip
            _timed(samples, "propose", started)
            mine[proposal.proposal_id] = proposal.args_hash
            n += 1
            next_at += interval
            if next_at < now:  # fell behind: count it, do not burst to catch up
                count("behind")
                next_at = now + interval
            continue
        # Until the next propose is due; once proposing is over (the drain), the feed's pace:
        # a wait of 0 there would spin, and 12 spinning agents took the CPU the steps still
        # being measured needed.
        due_in = next_at - time.monotonic() if now < stop_proposing else 0.05
        wait = min(0.05, max(0.0, due_in))
        if full_feed:
            records = ledger.wait_for_change(cursor, timeout=wait)
            cursor = records[-1].seq if records else cursor
        else:
            page = ledger.follow(page or cursor, wait, **interest)
            records, cursor = page.records, page.cursor
        if kind == "approver" and not approve_each:
            subjects = [
                record.subject for record in records
                if record.action == "propose" and (
                    _bucket(record.subject, APPROVERS) == index or _bucket(record.subject, 10) == 0
                )
            ]  # fmt: skip
            if subjects:  # what this feed page shows, decided in one write
                started = time.perf_counter()
                outcomes = ledger.approve_many(subjects, f"op-{index}@example.com", "ok")
                for outcome in outcomes:
                    if isinstance(outcome, LedgerError):
                        _timed(samples, "approve_refused", started)
                        count(f"approve_refused:{outcome.code}")
                    else:
                        _timed(samples, "approve", started)
                        count("approved")
                count("approve_batches")
            continue
        for record in records:
            subject = record.subject
            if kind == "approver" and record.action == "propose":
                if _bucket(subject, APPROVERS) != index and _bucket(subject, 10) != 0:
                    continue
                started = time.perf_counter()
                try:
                    ledger.approve(subject, f"op-{index}@example.com", "ok")
                except LedgerError as error:
                    _timed(samples, "approve_refused", started)
                    count(f"approve_refused:{error.code}")
                    continue
                _timed(samples, "approve", started)
                count("approved")
            elif kind == "agent" and record.action == "approve" and subject in mine:
                execute(subject, mine.pop(subject), record.at)
            elif kind == "racer" and record.action == "approve" and _bucket(subject, 10) == 0:
                proposal = ledger.get(subject)
                execute(subject, proposal.args_hash, record.at)
    cpu = time.process_time() - cpu_began
    board = ledger._board  # notices this process was sent (its change board's position)
    count(f"notices_heard:{kind}", 0 if board is None else board.mark())
    provider.close()
    print(json.dumps(
        {"role": name, "samples": samples, "counts": counts, "proposed": n, "cpu_s": cpu}
    ))  # fmt: skip


def peer_steps(
    url: str, cycles: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, list[float]]:
    """The cycle's row writes as bare psycopg SQL, one commit per step, timed per step in ms
    (``clock``: wall time, or ``time.process_time`` for the client's own CPU)."""
    from bench_ledger import _PEER_STEPS, Target, _peer_params, bare_connect

    connection = bare_connect(Target("peer", url))
    steps = [[sql.format(p="%s") for sql in step] for step in _PEER_STEPS]
    names = ("propose", "approve", "claim", "complete")
    samples: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(cycles):
        now = datetime.now(UTC)
        params = _peer_params(uuid.uuid4().hex, now, now + timedelta(days=1))
        for name, statements, values in zip(names, steps, params, strict=True):
            started = clock()
            with connection.transaction():
                for statement, row in zip(statements, values, strict=True):
                    assert connection.execute(statement, row).rowcount == 1
            samples[name].append((clock() - started) * 1000)
    connection.close()
    return samples


async def tui_probe(url: str, seconds: float) -> list[float]:
    """Key -> handled, every 0.25 s for ``seconds``, in the real TUI: ``down``/``up`` sent as
    a terminal key would be (``App.simulate_key``), timed until the inbox cursor has moved.

    (``Pilot.press`` is not used to time it: it returns only once the app's queues are idle,
    which under a stream of ledger updates measures the stream, not the key.)
    """
    from supervisor.cli.tui import collection_paused

    # Imported and built as the `supervisor` command does (``open_tui``): with the collector
    # paused, then what start-up made frozen, out of every later full collection.
    with collection_paused():
        from screens.app import make_app
        from screens.main_screen import MainScreen
        from screens.widgets.inbox.inbox_list import InboxList
        from supervisor.services.settings import SupervisorSettings

        app = make_app(SupervisorSettings(db_url=url))
    latencies: list[float] = []
    async with app.run_test(size=(160, 50)) as pilot:
        deadline = time.monotonic() + 60
        while not isinstance(app.screen, MainScreen) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        inbox = app.screen.query_one(InboxList)
        while len(inbox.row_ids) < 2 and time.monotonic() < deadline:
            await pilot.pause(0.05)
        inbox.focus()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            before = inbox.cursor_row
            started = time.perf_counter()
            app.simulate_key("down" if before == 0 else "up")
            while inbox.cursor_row == before and time.perf_counter() - started < 10:  # noqa: ASYNC110
                await asyncio.sleep(0.002)
            latencies.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.25)
    return latencies


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def verify(url: str) -> dict[str, Any]:
    """Read the outcome straight from the database."""
    import psycopg

    with psycopg.connect(_libpq(url)) as connection:
        statuses: dict[str, int] = dict(
            connection.execute("SELECT status, count(*) FROM proposal GROUP BY status").fetchall()
        )
        doubles = connection.execute(
            "SELECT count(*) FROM (SELECT proposal_id FROM execution GROUP BY proposal_id"
            " HAVING count(*) > 1) AS d"
        ).fetchone()
        executions = connection.execute("SELECT count(*) FROM execution").fetchone()
    return {
        "statuses": statuses,
        "double_executions": int(doubles[0]) if doubles else -1,
        "executions": int(executions[0]) if executions else -1,
    }


@contextlib.contextmanager
def postgres(
    pg_url: str | None, statements: bool = False, extra: Sequence[str] = ()
) -> Iterator[Any]:
    sys.path.insert(0, str(REPO / "tests"))
    from support.postgres import PostgresCluster

    settings = {"max_connections": "200"}
    if statements:  # the server's own account of its time, statement by statement
        settings |= {
            "shared_preload_libraries": "pg_stat_statements",
            "pg_stat_statements.track": "all",
            "pg_stat_statements.track_utility": "on",
            "pg_stat_statements.track_planning": "on",
        }
    for setting in extra:  # NAME=VALUE, last: they win
        name, _, value = setting.partition("=")
        settings[name.strip()] = value.strip()
    cluster = PostgresCluster(server_url=pg_url, fast=False, settings=settings)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def server_cpu(cluster: Any) -> float | None:
    """CPU seconds the throwaway cluster's processes have used so far (exited backends too:
    the postmaster's reaped children), or ``None`` for a server elsewhere."""
    if cluster.data_dir is None:
        return None
    postmaster = int((cluster.data_dir / "postmaster.pid").read_text().split()[0])
    ticks = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == postmaster:
            ticks += sum(int(value) for value in fields[11:15])  # with reaped backends
        elif ppid == postmaster:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def feed_relay(url: str, wanted: bool) -> Iterator[None]:
    """With ``wanted``: a ``supervisor feed-relay`` for ``url``, found by every process
    started from here (a private runtime folder in the environment)."""
    if not wanted:
        yield
        return
    import shutil
    import tempfile

    runtime = tempfile.mkdtemp(prefix="sv-team-")
    os.environ["XDG_RUNTIME_DIR"] = runtime
    relay = subprocess.Popen(
        [sys.executable, "-c", "from supervisor.cli.main import main; main()",
         "feed-relay", "--db", url],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert relay.stdout is not None and relay.stdout.readline().startswith("Relaying")
    try:
        yield
    finally:
        fields = Path(f"/proc/{relay.pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        relay.terminate()
        print(f"feed relay: {relay.communicate(timeout=30)[0].strip()} CPU {cpu:.1f} s")
        shutil.rmtree(runtime, ignore_errors=True)


_STATEMENTS = """
SELECT s.query, s.calls, s.total_exec_time, s.total_plan_time, s.plans,
 s.shared_blks_hit + s.shared_blks_read
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = current_database()
ORDER BY s.total_exec_time + s.total_plan_time DESC
"""


def reset_statements(url: str) -> None:
    """Start the server's statement account from zero (``--statements``)."""
    import psycopg

    with psycopg.connect(_libpq(url), autocommit=True) as connection:
        connection.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        connection.execute("SELECT pg_stat_statements_reset()")


def print_statements(url: str, proposed: int, top: int = 20) -> None:
    """Where the server's time went, per proposal made, statement by statement: execution
    and planning time as the server measures it (a lock's wait, and a COMMIT's flush to
    disk, are time but not CPU)."""
    import psycopg

    with psycopg.connect(_libpq(url), autocommit=True) as connection:
        rows = connection.execute(_STATEMENTS).fetchall()
    total = sum(float(row[2]) + float(row[3]) for row in rows)
    calls = sum(int(row[1]) for row in rows)
    print()
    print(f"server statements: {calls / proposed:.1f} a proposal, "
          f"{total / proposed:.2f} ms of execution and planning a proposal")  # fmt: skip
    print("| statement | calls a proposal | us a call (exec + plan) | buffers a call "
          "| ms a proposal | share |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for query, count, exec_ms, plan_ms, _, blocks in rows[:top]:
        spent = float(exec_ms) + float(plan_ms)
        text = " ".join(str(query).split())
        text = text if len(text) <= 90 else text[:87] + "..."
        print(f"| `{text.replace('|', '/')}` | {count / proposed:.2f} | "
              f"{spent / max(count, 1) * 1000:.0f} | {int(blocks) / max(count, 1):.1f} | "
              f"{spent / proposed:.3f} | "
              f"{spent / total:.1%} |")  # fmt: skip
    dump = os.environ.get("BENCH_TEAM_STATEMENTS")
    if dump:  # every statement's full text and figures, for reading
        Path(dump).write_text(
            json.dumps(
                [
                    {"query": q, "calls": c, "exec_ms": e, "plan_ms": p, "plans": n, "buffers": b}
                    for q, c, e, p, n, b in rows
                ],
                indent=1,
            )
        )


def summarise(label: str, samples: list[float]) -> str:
    return (
        f"| {label} | {len(samples):,} | {statistics.median(samples):.2f} | "
        f"{_pct(samples, 0.95):.2f} | {_pct(samples, 0.99):.2f} |"
        if samples
        else f"| {label} | 0 | | | |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=200.0, help="proposals/s, all agents")
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--quick", action="store_true", help="15 s")
    parser.add_argument("--pg-url")
    parser.add_argument("--no-tui", action="store_true")
    parser.add_argument(
        "--full-feed", action="store_true",
        help="every process reads the whole feed (wait_for_change) instead of what it follows",
    )  # fmt: skip
    parser.add_argument(
        "--approve-each", action="store_true",
        help="approvers approve one proposal per call (approve) instead of what each feed page "
        "shows in one call (approve_many)",
    )  # fmt: skip
    parser.add_argument(
        "--relay", action="store_true",
        help="every process hears the feed through one `supervisor feed-relay`",
    )  # fmt: skip
    parser.add_argument(
        "--statements", action="store_true",
        help="load pg_stat_statements in the throwaway cluster and print where the server's "
        "time went, per proposal, statement by statement",
    )  # fmt: skip
    parser.add_argument(
        "--server-setting", action="append", default=[], metavar="NAME=VALUE",
        help="a setting of the throwaway cluster (e.g. shared_buffers=2GB); repeatable",
    )  # fmt: skip
    parser.add_argument("--role", nargs=7, help="internal")
    options = parser.parse_args()
    if options.role:
        kind, index, url, rate, seconds, full_feed, approve = options.role
        args = (kind, int(index), url, float(rate), float(seconds), full_feed == "full",
                approve == "each")  # fmt: skip
        # A CPU-time cProfile of each role's first process (the waits are not counted).
        profile_dir = os.environ.get("BENCH_TEAM_PROFILE")
        if profile_dir and index == "0":
            import cProfile

            profile = cProfile.Profile(time.process_time)
            profile.runcall(role, *args)
            profile.dump_stats(str(Path(profile_dir) / f"{kind}-{index}.prof"))
        else:
            role(*args)
        return
    if options.quick:
        options.seconds = 15.0
    if options.statements and options.pg_url:
        parser.error("--statements needs the throwaway cluster (it loads pg_stat_statements)")
    with postgres(options.pg_url, options.statements, options.server_setting) as cluster:
        url = cluster.create_database(f"team_{os.getpid()}")
        from supervisor.store.provider import SQLModelProvider

        def migrated(target: str) -> str:
            provider = SQLModelProvider(target)
            provider.ledger  # noqa: B018 - brings the schema current
            provider.close()
            return target

        migrated(url)
        peer_url = cluster.create_database(f"team_peer_{os.getpid()}")
        migrated(peer_url)  # the same schema, made by our migrations
        peer = peer_steps(peer_url, 300)
        if not options.no_tui:  # rows for the idle probe's cursor to move over
            with SQLModelProvider(url) as seeding:
                for n in range(3):
                    seeding.ledger.propose(
                        "create_customer", "schema-v1", {"name": f"seed {n}"}, owner="seed"
                    )
        relay = feed_relay(url, options.relay)
        relay.__enter__()
        idle_tui = [] if options.no_tui else asyncio.run(tui_probe(url, 5.0))
        layout = (
            [("agent", i) for i in range(AGENTS)]
            + [("approver", i) for i in range(APPROVERS)]
            + [("racer", i) for i in range(RACERS)]
        )
        children = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--role",
                    kind,
                    str(i),
                    url,
                    str(options.rate),
                    str(options.seconds),
                    "full" if options.full_feed else "follow",
                    "each" if options.approve_each else "batch",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for kind, i in layout
        ]
        for child in children:  # every process imported and connected before the clock starts
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        start_at = time.time() + 1.0
        for child in children:
            assert child.stdin is not None
            child.stdin.write(f"{start_at!r}\n")
            child.stdin.flush()
        time.sleep(max(0.0, start_at - time.time()))
        if options.statements:
            reset_statements(url)
        server_began = server_cpu(cluster)
        load: list[float] = []
        tui_cpu: float | None = None
        if not options.no_tui:
            time.sleep(max(0.0, start_at - time.time() + 2.0))
            tui_began = time.process_time()
            probe = tui_probe(url, max(1.0, options.seconds - 4.0))
            profile_dir = os.environ.get("BENCH_TEAM_PROFILE")
            if profile_dir:  # the TUI's CPU-time profile too (the waits are not counted)
                import cProfile

                tui_profile = cProfile.Profile(time.process_time)
                load = tui_profile.runcall(asyncio.run, probe)
                tui_profile.dump_stats(str(Path(profile_dir) / "tui.prof"))
            else:
                load = asyncio.run(probe)
            tui_cpu = time.process_time() - tui_began
        reports = []
        for child in children:
            output, _ = child.communicate()
            if child.returncode != 0:
                raise SystemExit(f"a team process failed ({child.returncode})")
            reports.append(json.loads(output))
        server_ended = server_cpu(cluster)
        relay.__exit__(None, None, None)
        outcome = verify(url)
        proposed_now = sum(report["proposed"] for report in reports)
        if options.statements and proposed_now:
            print_statements(url, proposed_now)
    merged: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for report in reports:
        for key, values in report["samples"].items():
            merged.setdefault(key, []).extend(values)
        for key, value in report["counts"].items():
            counts[key] = counts.get(key, 0) + value
    proposed = sum(report["proposed"] for report in reports)
    print(
        f"{len(layout)} processes, {options.seconds:.0f} s at {options.rate:.0f} proposals/s asked"
    )
    print(f"proposed {proposed:,} ({proposed / options.seconds:.1f}/s), counts {counts}")
    print(f"database: {outcome}")
    cpu: dict[str, float] = {}
    for report in reports:
        kind = report["role"].rsplit("-", 1)[0]
        cpu[kind] = cpu.get(kind, 0.0) + report["cpu_s"]
    print("CPU seconds from the start to the end of the loop (drain included), per role kind: "
          + ", ".join(f"{kind} {seconds:.1f}" for kind, seconds in cpu.items()))  # fmt: skip
    if tui_cpu is not None:
        print(f"TUI process CPU while probed under the load: {tui_cpu:.1f} s")
    if server_began is not None and server_ended is not None and proposed:
        used = server_ended - server_began
        print(f"server CPU over the loop: {used:.1f} s, {used / proposed * 1000:.2f} ms a proposal"
              f" made{' (feed relay)' if options.relay else ''}")  # fmt: skip
    print()
    print("| step | n | p50 ms | p95 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|")
    for key in ("propose", "approve", "claim", "complete", "approved_to_claimed",
                "claim_refused", "approve_refused"):  # fmt: skip
        print(summarise(f"ours under load: {key}", merged.get(key, [])))
    for key, values in peer.items():
        print(summarise(f"peer, bare psycopg, idle: {key}", values))
    if not options.no_tui:
        print(summarise("TUI key -> handled, idle ledger", idle_tui))
        print(summarise("TUI key -> handled, under the team load", load))
    claim = merged.get("claim", [])
    if claim and peer["claim"]:
        print()
        print(
            f"claim p95 under load {_pct(claim, 0.95):.2f} ms = "
            f"{_pct(claim, 0.95) / _pct(peer['claim'], 0.95):.2f}x the bare idle claim p95; "
            f"double executions: {outcome['double_executions']}"
        )


if __name__ == "__main__":
    main()
