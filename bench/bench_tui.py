"""Supervisor TUI budgets (DESIGN §8, issue 6), each against a bare peer in the same run.

1. First paint with N pending (default 10,000): from ``make_app`` + headless ``run_test`` start
   the inbox drawing the last line of its first screen of rows (``render_line``; the rest
   loads in the background); also the time until every pending row is in the inbox and the
   app is idle. Peer: a bare Textual app whose DataTable gets the same rows from one bare
   sqlite3 SELECT.
2. Tail lag: a separate process appends trace events at a fixed rate (default 5,000/s, in
   batches every 20 ms) with its wall-clock write time in the payload; the lag is the time from
   the write to the live trace pane (``TraceView.set_events``) holding the event. Peer: a bare
   sqlite3 loop polling ``id > ?`` at the service's 0.1 s interval in the same process.
3. First screen of a ledger with M trace events (default 1,000,000, bulk-inserted with
   SQLAlchemy core): from ``make_app(review_source=...)`` start to the review timeline drawing
   the last line of its first screen with a row on it (``render_line``). Peer: a bare sqlite3
   SELECT of the first chunk (``FIRST_CHUNK`` rows). Then once in a fresh subprocess: first
   screen, time until the index is complete, and peak RSS at both points (as in 4).
4. First screen of an N-MB exported JSONL trace (default 1,000 MB, written line by line to a
   temp dir and deleted afterwards): in a fresh subprocess, from ``make_app(review_source=...)``
   start to the timeline drawing the last line of its first screen with a row on it, then to the
   index being complete; peak RSS (``resource.getrusage``) at both points.
5. Start-up of the real command (issue 17): ``supervisor`` in a pseudo-terminal (160x50) on the
   default ledger (``SUPERVISOR_HOME``) holding 30 pending, then on one with 100,000 proposals
   of which 10,000 pending; ``supervisor demo`` on a fresh demo home. Timed from the spawn to
   the first screen of inbox rows in the bytes written to the terminal (the demo: the inbox
   title), then to ``?`` answered (the help screen drawn: keys are accepted). Peers in the same
   run: ``python -c pass`` and a bare Textual app with one DataTable filled from one sqlite3
   SELECT of the first page, started the same way (``python -X importtime`` of the TUI path
   gives the breakdown).

Run: .venv/bin/python bench/bench_tui.py [--pending 10000] [--rate 5000] [--seconds 10]
     [--events 1000000] [--jsonl-mb 1000] [--rounds 3]
     [--only paint|tail|review|jsonl|startup] [--compare DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from leftovers import live_pids, wait_gone  # noqa: E402

SIZE = (160, 50)
ARGUMENTS = {"name": "Ada Lovelace", "email": "ada@example.com", "plan": "pro", "seats": 3}


def _provider(url: str) -> Any:
    from supervisor.store.provider import SQLModelProvider

    provider = SQLModelProvider(url)
    provider.ledger  # noqa: B018 - opens the engine and brings the schema current
    return provider


async def _until(predicate: Callable[[], bool], limit: float = 120.0) -> None:
    deadline = time.perf_counter() + limit
    while not predicate():
        if time.perf_counter() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.002)


# --- 1. first paint with N pending ---------------------------------------------------------


def seed_pending(url: str, count: int) -> None:
    """Bulk-insert ``count`` pending proposals (rows built from domain ``Proposal``s)."""
    import sqlalchemy as sa
    from sqlmodel import SQLModel

    from supervisor.canonical import args_hash
    from supervisor.ledger.models import Proposal, ProposalStatus
    from supervisor.store.convert import open_values, proposal_to_row
    from supervisor.store.tables import ProposalOpenRow, ProposalRow

    provider = _provider(url)
    table = SQLModel.metadata.tables[ProposalRow.__tablename__]
    open_table = SQLModel.metadata.tables[ProposalOpenRow.__tablename__]
    digest = args_hash("create_customer", "schema-v1", ARGUMENTS, {})
    start = datetime.now(UTC)
    rows, opened = [], []
    for index in range(count):
        created = start + timedelta(milliseconds=index)
        proposal = Proposal(
            proposal_id=uuid.uuid4().hex, tool_name="create_customer",
            tool_schema_hash="schema-v1", arguments=ARGUMENTS, args_hash=digest,
            execution_target={}, policy_reason="creates a customer", owner=f"agent-{index % 20}",
            thread_id=f"thread-{index % 500}", domains=("crm",), status=ProposalStatus.PENDING,
            created_at=created, updated_at=created, expires_at=created + timedelta(days=365),
        )  # fmt: skip
        rows.append(proposal_to_row(proposal).model_dump())
        open_row = open_values(proposal)
        assert open_row is not None
        opened.append(open_row)
    with provider.engine.begin() as connection:
        for offset in range(0, len(rows), 5_000):
            connection.execute(sa.insert(table), rows[offset : offset + 5_000])
            connection.execute(sa.insert(open_table), opened[offset : offset + 5_000])
    provider.close()


async def paint_supervisor(url: str, count: int) -> tuple[float, float]:
    """Seconds to the inbox's first painted screen of rows, and to every row loaded."""
    from textual.strip import Strip

    from screens.app import make_app
    from screens.main_screen import MainScreen
    from screens.widgets.inbox.inbox_pane import InboxPane
    from supervisor.services.settings import SupervisorSettings

    started = time.perf_counter()
    painted: list[float] = []
    app = make_app(SupervisorSettings(db_url=url))
    async with app.run_test(size=SIZE) as pilot:
        await _until(lambda: isinstance(app.screen, MainScreen))
        table = app.screen.query_one(InboxPane).table
        original = table.render_line

        def recording(y: int) -> Strip:
            # The last line of the first screen of rows is being drawn: the first paint.
            if not painted and y >= min(count, table.size.height - 1) and table.row_count:
                painted.append(time.perf_counter() - started)
            return original(y)

        table.render_line = recording  # type: ignore[method-assign]
        await _until(lambda: bool(painted))
        await _until(lambda: table.row_count >= count)
        await pilot.pause()
        return painted[0], time.perf_counter() - started


async def paint_peer(path: Path, count: int) -> float:
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable

    class Peer(App[None]):
        def compose(self) -> ComposeResult:
            yield DataTable()

        def on_mount(self) -> None:
            table: DataTable[str] = self.query_one(DataTable)
            table.add_columns("tool", "agent", "thread", "domain", "risk", "expires")
            with sqlite3.connect(path) as connection:
                rows = connection.execute(
                    "SELECT tool_name, owner, thread_id, 'crm', '-', p.expires_at"
                    " FROM proposal_open o JOIN proposal p ON p.id = o.proposal_id"
                    " WHERE status='pending' ORDER BY o.created_at, o.proposal_id"
                ).fetchall()
            table.add_rows([tuple(str(v) for v in row) for row in rows])

    started = time.perf_counter()
    app = Peer()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(DataTable)
        await _until(lambda: table.row_count >= count)
        await pilot.pause()
        return time.perf_counter() - started


def bench_paint(folder: Path, count: int, rounds: int) -> dict[str, Any]:
    path = folder / "pending.db"
    url = f"sqlite:///{path}"
    seed_pending(url, count)
    ours = [asyncio.run(paint_supervisor(url, count)) for _ in range(rounds)]
    peer = [asyncio.run(paint_peer(path, count)) for _ in range(rounds)]
    return {
        "pending": count,
        "supervisor_first_paint_s": [round(first, 3) for first, _ in ours],
        "supervisor_all_rows_s": [round(every, 3) for _, every in ours],
        "peer_s": [round(seconds, 3) for seconds in peer],
    }


# --- 2. tail lag while another process writes ----------------------------------------------


def writer(url: str, rate: int, seconds: float) -> None:
    """Append ``rate`` events/s for ``seconds`` in 20 ms batches, stamping the write time."""
    from supervisor.ledger.models import TraceEvent

    provider = _provider(url)
    per_batch = max(1, rate // 50)
    deadline = time.monotonic() + seconds
    tick = time.monotonic()
    written = 0
    while time.monotonic() < deadline:
        stamp = time.time()
        batch = [
            TraceEvent(
                at=datetime.now(UTC),
                agent_id=f"agent-{i % 4}",
                thread_id="t",
                run_id="r",
                kind="tool_result",
                tool="inventory_lookup",
                outcome_status="success",
                payload={"t": stamp, "n": written + i},
            )
            for i in range(per_batch)
        ]
        provider.ledger.append_trace(batch)
        written += per_batch
        tick += 0.02
        time.sleep(max(0.0, tick - time.monotonic()))
    provider.close()
    print(json.dumps({"written": written, "seconds": seconds}), flush=True)


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {}
    return {
        "n": len(ordered),
        "p50_ms": round(1000 * statistics.median(ordered), 1),
        "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 1),
        "max_ms": round(1000 * ordered[-1], 1),
    }


async def tail_supervisor(url: str, rate: int, seconds: float) -> dict[str, Any]:
    from screens.app import make_app
    from screens.main_screen import MainScreen
    from screens.widgets.trace.trace_view import TraceView
    from supervisor.ledger.models import TraceEvent
    from supervisor.services.settings import SupervisorSettings

    lags: list[float] = []
    app = make_app(SupervisorSettings(db_url=url))
    async with app.run_test(size=SIZE) as pilot:
        await _until(lambda: isinstance(app.screen, MainScreen))
        view = app.screen.query_one(TraceView)
        original = view.set_events

        def recording(events: list[TraceEvent]) -> None:
            original(events)
            if events and "t" in events[-1].payload:
                lags.append(time.time() - float(events[-1].payload["t"]))

        view.set_events = recording  # type: ignore[method-assign]
        process = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--writer", url, str(rate), str(seconds),
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        while process.returncode is None:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        output = await process.stdout.read() if process.stdout else b"{}"
        report = json.loads(output or b"{}")
    return {**report, "repaints": len(lags), **_percentiles(lags[1:])}


def tail_peer(url: str, rate: int, seconds: float) -> dict[str, Any]:
    """A bare driver connection reading ``id > ?`` every 0.1 s while the same writer runs."""
    lags: list[float] = []
    connection: Any
    if url.startswith("sqlite:///"):
        connection = sqlite3.connect(url[len("sqlite:///") :])
        query = "SELECT id, payload_json FROM trace_event WHERE id > ? ORDER BY id LIMIT 2000"
    else:
        import psycopg

        connection = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
        connection.autocommit = True
        query = "SELECT id, payload_json FROM trace_event WHERE id > %s ORDER BY id LIMIT 2000"
    after = connection.execute("SELECT coalesce(max(id), 0) FROM trace_event").fetchone()[0]
    process = subprocess.Popen(
        [sys.executable, __file__, "--writer", url, str(rate), str(seconds)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    while process.poll() is None:
        rows = connection.execute(query, (after,)).fetchall()
        if rows:
            after = rows[-1][0]
            lags.append(time.time() - float(json.loads(rows[-1][1])["t"]))
        time.sleep(0.1)
    connection.close()
    return _percentiles(lags[1:])


def bench_tail(folder: Path, rate: int, seconds: float, pg: str | None) -> dict[str, Any]:
    """Tail lag on SQLite, and on PostgreSQL (LISTEN/NOTIFY) unless ``pg`` is ``"none"``.

    ``pg``: ``None`` starts a throwaway durable cluster (tests/support/postgres.py), a URL uses
    that server.
    """
    results: dict[str, Any] = {"rate": rate, "seconds": seconds}
    url = f"sqlite:///{folder / 'tail.db'}"
    _provider(url).close()
    results["sqlite"] = {
        "supervisor": asyncio.run(tail_supervisor(url, rate, seconds)),
        "peer": tail_peer(url, rate, seconds),
    }
    if pg != "none":
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from support.postgres import PostgresCluster

        with PostgresCluster(server_url=pg, fast=False) as cluster:
            for label in ("supervisor", "peer"):  # each on its own empty database
                url = cluster.create_database(f"tail_{label}_{os.getpid()}")
                _provider(url).close()
                results.setdefault("postgresql", {})[label] = (
                    asyncio.run(tail_supervisor(url, rate, seconds))
                    if label == "supervisor"
                    else tail_peer(url, rate, seconds)
                )
    return results


# --- 3. first screen of a large ledger in the offline review --------------------------------


def seed_events(path: Path, count: int) -> float:
    """Bulk-insert ``count`` trace events with SQLAlchemy core; returns the seconds taken."""
    import sqlalchemy as sa
    from sqlmodel import SQLModel

    from supervisor.store.tables import TraceEventRow

    started = time.perf_counter()
    provider = _provider(f"sqlite:///{path}")
    table = SQLModel.metadata.tables[TraceEventRow.__tablename__]
    base = datetime(2030, 1, 1, tzinfo=UTC)
    statuses = ("success", "success", "success", "empty", "fallback", "error")
    tools = ("inventory_lookup", "create_customer", "export_report", "search_docs")
    with provider.engine.begin() as connection:
        for offset in range(0, count, 50_000):
            connection.execute(
                sa.insert(table),
                [
                    {
                        "at": base + timedelta(milliseconds=i),
                        "agent_id": f"agent-{i % 8}",
                        "thread_id": f"thread-{i % 300}",
                        "run_id": f"run-{i // 50}",
                        "kind": "tool_result",
                        "tool": tools[i % 4],
                        "outcome_status": statuses[i % 6],
                        "reason_code": "ok",
                        "payload_json": f'{{"n": {i}}}',
                        "blob_ref": None,
                    }
                    for i in range(offset, min(count, offset + 50_000))
                ],
            )
    provider.close()
    return time.perf_counter() - started


def _record_first_screen(painted: list[float], started: float) -> Callable[[], None]:
    """Record when a review timeline draws the last line of a screen with a row on it.

    Patched on the class before the app starts, so a first screen painted before the timeline
    could be queried is not missed (which would measure the next repaint instead). Returns the
    undo.
    """
    from textual.strip import Strip

    from screens.widgets.review.timeline import ReviewTimeline

    original = ReviewTimeline.render_line

    def recording(self: ReviewTimeline, y: int) -> Strip:
        if not painted and y >= self.size.height - 1 and len(self.rows) > y:
            painted.append(time.perf_counter() - started)
        return original(self, y)

    ReviewTimeline.render_line = recording  # type: ignore[method-assign]
    return lambda: setattr(ReviewTimeline, "render_line", original)


async def review_supervisor(path: Path) -> float:
    from screens.app import make_app

    started = time.perf_counter()
    painted: list[float] = []
    undo = _record_first_screen(painted, started)
    try:
        app = make_app(review_source=str(path))
        async with app.run_test(size=SIZE):
            await _until(lambda: bool(painted))
            return painted[0]
    finally:
        undo()


def review_peer(path: Path) -> float:
    from supervisor.services.review.rows import FIRST_CHUNK

    started = time.perf_counter()
    with sqlite3.connect(path) as connection:
        connection.execute(
            "SELECT * FROM trace_event ORDER BY id LIMIT ?", (FIRST_CHUNK,)
        ).fetchall()
    return time.perf_counter() - started


def bench_review(folder: Path, count: int, rounds: int) -> dict[str, Any]:
    path = folder / "events.db"
    seeded = seed_events(path, count)
    ours = [asyncio.run(review_supervisor(path)) for _ in range(rounds)]
    peer = [review_peer(path) for _ in range(rounds)]
    return {
        "events": count,
        "seed_s": round(seeded, 1),
        "file_mb": round(path.stat().st_size / 1e6),
        "supervisor_s": ours,
        "peer_s": peer,
        "fresh_process": _measure_in_subprocess(path),
    }


# --- 4. first screen of a large JSONL trace in the offline review ----------------------------


def write_jsonl(path: Path, megabytes: int) -> int:
    """Write trace events as exported JSONL until the file holds ``megabytes`` MB; the count."""
    base = datetime(2030, 1, 1, tzinfo=UTC)
    statuses = ("success", "success", "success", "empty", "fallback", "error")
    tools = ("inventory_lookup", "create_customer", "export_report", "search_docs")
    limit = megabytes * 1_000_000
    written = count = 0
    with path.open("w", encoding="utf-8", buffering=1 << 20) as handle:
        while written < limit:
            lines = []
            for i in range(count, count + 10_000):
                event = {
                    "event_id": i + 1, "at": (base + timedelta(milliseconds=i)).isoformat(),
                    "agent_id": f"agent-{i % 8}", "thread_id": f"thread-{i % 300}",
                    "run_id": f"run-{i // 50}", "kind": "tool_result", "tool": tools[i % 4],
                    "outcome_status": statuses[i % 6], "reason_code": "ok",
                    "payload": {"n": i, "call_id": f"call-{i:012d}", "latency_ms": i % 997,
                                "outcome": {"status": statuses[i % 6], "rows": i % 50}},
                    "blob_ref": None,
                }  # fmt: skip
                lines.append(json.dumps(event) + "\n")
            text = "".join(lines)
            handle.write(text)
            written += len(text)
            count += len(lines)
    return count


def _measure_in_subprocess(path: Path) -> dict[str, Any]:
    """First screen, full index and peak RSS of reviewing ``path`` in a fresh process."""
    output = subprocess.run(
        [sys.executable, __file__, "--jsonl-measure", str(path)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


async def _jsonl_measure(path: Path) -> dict[str, Any]:
    import resource

    from screens.app import make_app
    from screens.review_screen import ReviewScreen

    def rss_mb() -> float:
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

    started = time.perf_counter()
    painted: list[float] = []
    _record_first_screen(painted, started)
    app = make_app(review_source=str(path))
    async with app.run_test(size=SIZE):
        await _until(lambda: bool(painted))
        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        first_rss = rss_mb()
        await _until(lambda: screen.index.complete, limit=3_600)
        return {
            "first_screen_s": round(painted[0], 3),
            "peak_rss_first_screen_mb": first_rss,
            "indexed_s": round(time.perf_counter() - started, 1),
            "peak_rss_indexed_mb": rss_mb(),
            "events_indexed": len(screen.index.rows),
            "index_db_mb": round(screen.index.path.stat().st_size / 1e6),
        }


def bench_jsonl(folder: Path, megabytes: int, rounds: int) -> dict[str, Any]:
    path = folder / "trace.jsonl"
    started = time.perf_counter()
    count = write_jsonl(path, megabytes)
    written = time.perf_counter() - started
    try:
        runs = [_measure_in_subprocess(path) for _ in range(rounds)]
    finally:
        path.unlink()
    return {"events": count, "file_mb": megabytes, "write_s": round(written, 1), "runs": runs}


# --- 5. start-up of the real command in a pseudo-terminal ---------------------------------

SUPERVISOR = str(Path(sys.executable).parent / "supervisor")
HELP_MARKER = b"Keys of this screen"
PEER_APP = """
import sqlite3, sys
from textual.app import App
from textual.widgets import DataTable

class Peer(App):
    def compose(self):
        yield DataTable()

    def on_mount(self):
        table = self.query_one(DataTable)
        table.add_columns("id", "tool", "agent", "thread", "domain", "risk", "expires")
        with sqlite3.connect(sys.argv[1]) as connection:
            rows = connection.execute(
                "SELECT id, tool_name, owner, thread_id, 'crm', '-', p.expires_at"
                " FROM proposal_open o JOIN proposal p ON p.id = o.proposal_id"
                " WHERE status='pending' ORDER BY o.created_at, o.proposal_id LIMIT 200"
            ).fetchall()
        table.add_rows([tuple(str(v)[:12] for v in row) for row in rows])

    def key_question_mark(self):
        self.query_one(DataTable).add_row(*(["Keys of this screen"] + ["-"] * 6))

Peer().run()
"""


def _terminal_run(
    argv: list[str],
    env: dict[str, str],
    ready: bytes,
    *,
    answer: bytes | None = HELP_MARKER,
    limit: float = 60.0,
) -> tuple[float, float | None]:
    """Seconds from spawning ``argv`` on a fresh 160x50 pty until ``ready`` is written to it,
    then until ``?`` pressed at that moment is answered with ``answer`` (``None``: not asked).

    The child leads its own session; it is sent ``q`` (and SIGTERM/SIGKILL if it lingers).
    """
    import fcntl
    import os
    import select
    import signal
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
        close_fds=True,
    )  # fmt: skip
    os.close(slave)
    seen = bytearray()
    first: float | None = None
    answered: float | None = None
    deadline = started + limit
    try:
        while time.perf_counter() < deadline:
            readable, _, _ = select.select([master], [], [], 0.05)
            if readable:
                try:
                    chunk = os.read(master, 1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
            if first is None and ready in seen:
                first = time.perf_counter() - started
                if answer is None:
                    break
                del seen[:]
                os.write(master, b"?")
            elif first is not None and answer is not None and answer in seen:
                answered = time.perf_counter() - started
                break
            if process.poll() is not None and not readable:
                break
        if first is None:
            tail = bytes(seen[-2000:]).decode(errors="replace")
            raise TimeoutError(f"{argv[-1]!r}: {ready!r} not seen; the terminal ended with {tail}")
        return first, answered
    finally:
        try:
            os.write(master, b"\x1bq")
        except OSError:
            pass
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            for signum in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(process.pid, signum)
                    process.wait(timeout=5)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
        os.close(master)


def _median(samples: list[float | None]) -> float | None:
    values = [value for value in samples if value is not None]
    return round(statistics.median(values), 3) if values else None


def bench_startup(folder: Path, rounds: int, compare: Path | None = None) -> dict[str, Any]:
    """Spawn-to-interactive of ``supervisor`` and ``supervisor demo`` against peers, in turn.

    ``compare``: another checkout (e.g. ``git archive main``) whose ``supervisor`` runs the same
    cases in the same rounds (``PYTHONPATH`` puts it ahead of this one), for a before/after.
    """
    import os
    import shutil

    # As installed: every module's bytecode compiled (this tree may be run with
    # PYTHONDONTWRITEBYTECODE, which would recompile every module on every start).
    for tree in (REPO, *([compare] if compare else [])):
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "supervisor", "screens", "sandboxes"],
            cwd=tree, check=True, capture_output=True,
        )  # fmt: skip
    base_env = {key: value for key, value in os.environ.items() if key not in {"COLUMNS", "LINES"}}
    base_env.update(TERM="xterm-256color", SUPERVISOR_NOTIFY="none")
    home = folder / "home"
    home.mkdir()
    seed_pending(f"sqlite:///{home / 'ledger.db'}", 30)
    large = folder / "large.db"
    seed_pending(f"sqlite:///{large}", 10_000)
    _seed_decided(f"sqlite:///{large}", 90_000)
    # Row 20 of the first page (thread-19) is the last line of the first screen of rows.
    row = b"thread-19 "
    cases: dict[str, tuple[list[str], dict[str, str], bytes, bytes | None]] = {
        "python -c pass": ([sys.executable, "-c", "print('ready')"], base_env, b"ready", None),
        "peer: bare Textual app + DataTable (30 pending)": (
            [sys.executable, "-c", PEER_APP, str(home / "ledger.db")], base_env,
            b"thread-19", HELP_MARKER,
        ),
        "supervisor (default ledger, 30 pending)": (
            [SUPERVISOR], {**base_env, "SUPERVISOR_HOME": str(home)}, row, HELP_MARKER,
        ),
        "supervisor --db (100k proposals, 10k pending)": (
            [SUPERVISOR, "--db", f"sqlite:///{large}"], base_env, row, HELP_MARKER,
        ),
    }  # fmt: skip
    demo_home = folder / "demo"
    cases["supervisor demo (fresh demo home)"] = (
        [SUPERVISOR, "demo", "--home", str(demo_home)], base_env, b"Approval inbox", HELP_MARKER,
    )  # fmt: skip
    if compare is not None:
        for name in [name for name in cases if name.startswith("supervisor")]:
            argv, env, ready, answer = cases[name]
            cases[f"{name} [{compare}]"] = (
                argv, {**env, "PYTHONPATH": str(compare)}, ready, answer,
            )  # fmt: skip
    samples: dict[str, list[tuple[float, float | None]]] = {name: [] for name in cases}
    load = [os.getloadavg()[0]]
    for _ in range(rounds):  # interleaved, so a burst of load hits every case alike
        for name, (argv, env, ready, answer) in cases.items():
            shutil.rmtree(demo_home, ignore_errors=True)
            before = live_pids()
            samples[name].append(_terminal_run(argv, env, ready, answer=answer, limit=120))
            # The demo's agents and Chromium outlive its terminal by a moment: the next case
            # would start beside them and pay for their shutdown.
            wait_gone(before)
        load.append(os.getloadavg()[0])
    return {
        "rounds": rounds,
        "load_avg_1m": [round(value, 2) for value in load],
        **{
            name: {
                "drawn_s": [round(first, 3) for first, _ in runs],
                "keys_answered_s": [None if k is None else round(k, 3) for _, k in runs],
                "median_drawn_s": _median([first for first, _ in runs]),
                "median_keys_answered_s": _median([k for _, k in runs]),
            }
            for name, runs in samples.items()
        },
    }


def _seed_decided(url: str, count: int) -> None:
    """Bulk-insert ``count`` decided (rejected) proposals beside the pending, and the audit
    records of them all."""
    import sqlalchemy as sa
    from sqlmodel import SQLModel

    from supervisor.store.tables import AuditRow, ProposalRow

    provider = _provider(url)
    table = SQLModel.metadata.tables[ProposalRow.__tablename__]
    with provider.engine.begin() as connection:
        template = dict(connection.execute(sa.select(table).limit(1)).mappings().one())
        start = datetime.now(UTC) - timedelta(days=30)
        for offset in range(0, count, 5_000):
            rows = []
            for index in range(offset, min(count, offset + 5_000)):
                created = start + timedelta(milliseconds=index)
                rows.append({
                    **template, "id": uuid.uuid4().hex, "status": "rejected",
                    "created_at": created, "updated_at": created, "decided_at": created,
                })  # fmt: skip
            connection.execute(sa.insert(table), rows)
        # The audit log a ledger of that size holds: a propose record for every proposal and
        # a reject for every decided one (hashes are not chained: the TUI never verifies).
        audit = SQLModel.metadata.tables[AuditRow.__tablename__]
        seq = connection.execute(sa.select(sa.func.coalesce(sa.func.max(audit.c.seq), 0))).scalar()
        proposals = connection.execute(
            sa.select(table.c.id, table.c.status, table.c.created_at).order_by(table.c.created_at)
        ).all()
        records = []
        for proposal_id, status, created in proposals:
            actions = ("propose",) if status == "pending" else ("propose", "reject")
            for action in actions:
                seq += 1
                records.append({
                    "seq": seq, "at": created, "actor": "agent-1", "action": action,
                    "subject": proposal_id, "payload_json": "{}", "prev_hash": "0" * 64,
                    "hash": f"{seq:064x}",
                })  # fmt: skip
        for offset in range(0, len(records), 5_000):
            connection.execute(sa.insert(audit), records[offset : offset + 5_000])
    provider.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=5_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--jsonl-mb", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--only", choices=("paint", "tail", "review", "jsonl", "startup"), default=None
    )
    parser.add_argument(
        "--compare", type=Path, metavar="DIR",
        help="startup: also run another checkout's supervisor in the same rounds",
    )  # fmt: skip
    parser.add_argument(
        "--tail-pg", metavar="URL",
        help="tail: PostgreSQL server to use (default: a throwaway cluster; 'none' skips it)",
    )  # fmt: skip
    parser.add_argument("--jsonl-measure", metavar="PATH", help="internal")
    parser.add_argument("--writer", nargs=3, metavar=("URL", "RATE", "SECONDS"), help="internal")
    args = parser.parse_args()
    if args.writer:
        writer(args.writer[0], int(args.writer[1]), float(args.writer[2]))
        return
    if args.jsonl_measure:
        print(json.dumps(asyncio.run(_jsonl_measure(Path(args.jsonl_measure)))), flush=True)
        return
    with tempfile.TemporaryDirectory(prefix="bench-tui-") as folder:
        results: dict[str, Any] = {}
        if args.only in (None, "paint"):
            results["paint"] = bench_paint(Path(folder), args.pending, args.rounds)
            print(json.dumps(results["paint"]), flush=True)
        if args.only in (None, "tail"):
            results["tail"] = bench_tail(Path(folder), args.rate, args.seconds, args.tail_pg)
            print(json.dumps(results["tail"]), flush=True)
        if args.only in (None, "review"):
            results["review"] = bench_review(Path(folder), args.events, args.rounds)
            print(json.dumps(results["review"]), flush=True)
        if args.only in (None, "startup"):
            results["startup"] = bench_startup(Path(folder), args.rounds, args.compare)
            print(json.dumps(results["startup"]), flush=True)
        if args.only in (None, "jsonl"):
            results["jsonl"] = bench_jsonl(Path(folder), args.jsonl_mb, args.rounds)
            print(json.dumps(results["jsonl"]), flush=True)


if __name__ == "__main__":
    main()
