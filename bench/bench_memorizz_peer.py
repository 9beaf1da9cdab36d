"""Durable approval cycle: our ledger against MemoRizz's own approval store, in one run.

DESIGN §8 budget: a durable approval cycle >= 10x faster than the MemoRizz store's.

Peer: ``memorizz.approval.SQLiteApprovalStore`` (memorizz 0.17.16), the only implementation of
MemoRizz's ``ApprovalStore`` protocol and the store behind ``MemAgent.list_approval_proposals``,
``approve``, ``reject``/``cancel_approval`` and ``resume_approval`` (``MemAgent`` creates it
lazily via ``default_approval_store()``; it is independent of the MongoDB/Oracle/filesystem
memory providers). It is a local SQLite file (WAL, a fresh connection per call, SQLite's default
``synchronous``, FULL). One peer cycle is what MemoRizz's host API does to that store, with no
model and no tool call:

1. ``store.propose(owner_id, tool_name, arguments, policy_reason, checkpoint)``: what
   ``MemAgent`` does when a governed tool pauses (``checkpoint`` is a minimal one: version,
   thread id, tool call id, logical tool name and arguments; a real run also stores the message
   history and workflow);
2. ``store.approve(proposal_id, approver_id, decision_reason)``: ``MemAgent.approve``;
3. ``store.get(proposal_id)`` + owner/status check, then ``store.consume(proposal_id,
   expected_tool_name, expected_arguments)``: the storage part of
   ``MemAgent.resume_approval`` before it executes the tool;
4. nothing: MemoRizz's store has no executing/executed/outcome state (``consumed`` is terminal;
   the tool result goes to the workflow memory, not the approval store).

Ours, in a subprocess running the project venv: ``bench_ledger.ledger_cycle`` (propose ->
approve -> claim -> complete through ``SQLModelProvider(url).ledger``) on a SQLite file, with
the same arguments. Both paths are run at ``synchronous`` NORMAL (our default; MemoRizz's
``_connect`` patched to add ``PRAGMA synchronous = NORMAL``) and FULL (MemoRizz's default),
interleaved round by round, each on its own file that grows over the run.

Floor: in the same worker, the cycle's row writes as bare ``sqlite3`` statements with the ledger's
pragmas (WAL, the same ``synchronous``), one commit per step as ours (4 per cycle), on a file
with our schema and the same preload (``bench_ledger.sqlite_peer_cycle``). MemoRizz / floor is
the most any implementation with those 4 durable commits could reach against MemoRizz.

Run with the throwaway venv that has ``memorizz`` installed (never the project venv):

    python3.11 -m venv /tmp/memorizz-venv && /tmp/memorizz-venv/bin/pip install memorizz==0.17.16
    /tmp/memorizz-venv/bin/python bench/bench_memorizz_peer.py [--cycles 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OURS_PYTHON = REPO / ".venv" / "bin" / "python"
ARGUMENTS = {"name": "Ada Lovelace", "email": "ada@example.com", "plan": "pro", "seats": 3}
LEVELS = ("NORMAL", "FULL")


# The measurement helpers are bench_ledger's (its top level imports only the standard library,
# so it loads in the MemoRizz venv too).
from bench_ledger import Series, percentile, timed  # noqa: E402

FLOOR = "floor: bare sqlite3, the cycle's row writes, 4 commits,"

# --- ours: a worker process on the project venv ---------------------------------------------


def worker(workdir: Path, preload: int) -> None:
    """``--worker``: open one ledger per level; answer ``LEVEL COUNT`` lines with JSON samples."""
    sys.path[:0] = [str(REPO), str(REPO / "bench")]
    bench_ledger: Any = importlib.import_module("bench_ledger")
    cycles: dict[str, Callable[[], None]] = {}
    providers: list[Any] = []
    for level in LEVELS:
        target = bench_ledger.Target(level, f"sqlite:///{workdir / f'ours-{level}.db'}", level)
        floor = bench_ledger.Target(level, f"sqlite:///{workdir / f'floor-{level}.db'}", level)
        if preload:
            bench_ledger.seed(target, preload, preload // 10)
            bench_ledger.seed(floor, preload, preload // 10)
        else:
            bench_ledger.open_ledger(floor).close()  # the schema, for the bare statements
        provider = bench_ledger.open_ledger(target)
        providers.append(provider)
        cycles[level] = bench_ledger.ledger_cycle(provider.ledger)
        bare, connection = bench_ledger.sqlite_peer_cycle(
            floor.sqlite_file, level, one_transaction=False
        )
        providers.append(connection)
        cycles[f"floor-{level}"] = bare
    try:
        for line in sys.stdin:
            level, count = line.split()
            print(json.dumps(timed(cycles[level], int(count))), flush=True)
    finally:
        for provider in providers:
            provider.close()


class Ours:
    """The worker process, driven over a pipe; samples are timed inside it."""

    def __init__(self, python: Path, workdir: Path, preload: int) -> None:
        self.process = subprocess.Popen(
            [str(python), __file__, "--worker", str(workdir), "--preload", str(preload)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, level: str, count: int) -> list[float]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{level} {count}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"ledger worker exited with {self.process.wait()}")
        samples: list[float] = json.loads(line)
        return samples

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        if self.process.wait(timeout=60) != 0:
            raise RuntimeError(f"ledger worker exited with {self.process.returncode}")


# --- the peer: MemoRizz's SQLiteApprovalStore -----------------------------------------------


def memorizz_preload(store: Any, total: int) -> None:
    """Bulk-insert ``total`` proposals (a tenth pending, the rest decided) as ``seed`` does."""
    approval: Any = importlib.import_module("memorizz.approval")
    status = approval.ApprovalStatus
    others = [status.CONSUMED] * 6 + [status.REJECTED, status.EXPIRED, status.REJECTED]
    start = datetime.now(UTC) - timedelta(days=30)
    digest = approval.argument_hash("create_customer", ARGUMENTS)
    rows = []
    for index in range(total):
        created = start + timedelta(seconds=index * 20)
        state = status.PENDING if index % 10 == 0 else others[index % len(others)]
        rows.append((
            str(uuid.uuid4()), f"agent-{index % 20}", "create_customer",
            approval.canonical_arguments(ARGUMENTS), digest, "creates a customer",
            json.dumps({"thread_id": f"thread-{index % 500}"}), state.value,
            created.isoformat(), (created + timedelta(days=365)).isoformat(),
        ))  # fmt: skip
    connection = sqlite3.connect(store.path)
    with connection:
        connection.executemany(
            "INSERT INTO approval_proposals (proposal_id, owner_id, tool_name, arguments_json,"
            " argument_hash, policy_reason, checkpoint_json, status, created_at, expires_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    connection.close()


def memorizz_store(path: Path, level: str) -> Any:
    """A ``SQLiteApprovalStore`` on ``path``; at NORMAL its ``_connect`` also sets the level."""
    approval: Any = importlib.import_module("memorizz.approval")
    store_class: Any = approval.SQLiteApprovalStore
    if level == "NORMAL":

        class NormalStore(store_class):  # type: ignore[misc]
            def _connect(self) -> sqlite3.Connection:
                connection: sqlite3.Connection = super()._connect()
                connection.execute("PRAGMA synchronous = NORMAL")
                return connection

        store_class = NormalStore
    store = store_class(path)
    with store._connect() as connection:
        reported = connection.execute("PRAGMA synchronous").fetchone()[0]
        mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
    connection.close()
    assert (reported, mode) == ({"NORMAL": 1, "FULL": 2}[level], "wal"), (reported, mode)
    return store


def memorizz_cycle(store: Any) -> Callable[[], None]:
    """propose -> approve -> (resume's) get + consume through MemoRizz's store API."""
    approval: Any = importlib.import_module("memorizz.approval")
    approved, consumed = approval.ApprovalStatus.APPROVED, approval.ApprovalStatus.CONSUMED

    def cycle() -> None:
        proposal = store.propose(
            owner_id="bench-agent", tool_name="create_customer", arguments=ARGUMENTS,
            policy_reason="creates a customer",
            checkpoint={
                "version": 1, "thread_id": "bench", "tool_call_id": "call-1",
                "logical_tool_name": "create_customer", "logical_arguments": ARGUMENTS,
            },
        )  # fmt: skip
        store.approve(proposal.proposal_id, approver_id="op@example.com", decision_reason="ok")
        current = store.get(proposal.proposal_id)
        assert current.owner_id == "bench-agent" and current.status == approved
        checkpoint = current.checkpoint
        done = store.consume(
            proposal.proposal_id,
            expected_tool_name=checkpoint["logical_tool_name"],
            expected_arguments=checkpoint["logical_arguments"],
        )
        assert done.status == consumed

    return cycle


# --- run and report ---------------------------------------------------------------------------


def print_report(rows: Sequence[Series], medians: dict[str, list[float]]) -> None:
    print("\n| path | cycles/s | p50 ms/cycle | p95 ms/cycle | n |")
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row.label} | {row.per_second:,.0f} | {row.ms(0.5):.2f} | {row.ms(0.95):.2f} "
            f"| {len(row.samples)} |"
        )
    print("\nMemoRizz / X, the median of the per-round ratios of p50s (range over rounds); the "
          "floor's is the most any cycle with 4 commits could reach")  # fmt: skip
    print("\n| SQLite synchronous | MemoRizz / ours | MemoRizz / floor | ours / floor |")
    print("|---|---:|---:|---:|")

    def ratio(top: str, bottom: str) -> str:
        values = [a / b for a, b in zip(medians[top], medians[bottom], strict=True)]
        return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"

    for level in LEVELS:
        ours, peer, floor = (
            f"ledger, SQLite {level}",
            f"peer: MemoRizz, {level}",
            f"{FLOOR} {level}",
        )
        print(f"| {level} | {ratio(peer, ours)} | {ratio(peer, floor)} | {ratio(ours, floor)} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=300, help="cycles per path per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ours-python", type=Path, default=OURS_PYTHON, help="project venv")
    parser.add_argument(
        "--preload", type=int, default=0, help="proposals in each store before measuring"
    )
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        worker(options.worker, options.preload)
        return

    memorizz: Any = importlib.import_module("memorizz")
    version = importlib.import_module("importlib.metadata").version("memorizz")
    print(
        f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, memorizz {version} "
        f"({Path(memorizz.__file__).parent}); cycles {options.cycles} x {options.rounds} rounds; "
        f"preloaded proposals per store: {options.preload:,}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-memorizz-") as name:
        work = Path(name)
        ours = Ours(options.ours_python, work, options.preload)
        try:
            paths: list[tuple[str, Callable[[int], list[float]]]] = []
            for level in LEVELS:
                store = memorizz_store(work / f"memorizz-{level}.sqlite3", level)
                if options.preload:
                    memorizz_preload(store, options.preload)
                peer = memorizz_cycle(store)
                paths.append((f"ledger, SQLite {level}", functools.partial(ours.run, level)))
                paths.append((f"peer: MemoRizz, {level}", functools.partial(timed, peer)))
                paths.append((f"{FLOOR} {level}", functools.partial(ours.run, f"floor-{level}")))
            for _, run in paths:
                run(max(10, options.cycles // 10))  # warm-up
            series: dict[str, Series] = {}
            medians: dict[str, list[float]] = {}
            for round_index in range(options.rounds):
                for label, run in paths if round_index % 2 == 0 else paths[::-1]:
                    samples = run(options.cycles)
                    series.setdefault(label, Series(label, [])).samples.extend(samples)
                    medians.setdefault(label, []).append(percentile(samples, 0.5))
        finally:
            ours.close()
    print_report(list(series.values()), medians)


if __name__ == "__main__":
    main()
