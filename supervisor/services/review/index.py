"""The offline review's index: every row of a trace in a temporary on-disk SQLite database.

Memory stays about constant whatever the size of the source: a chunk of rows is inserted with
``executemany`` and dropped, the timeline pages the rows on screen out of the database, and a
filtered selection is a table of row numbers in the same database, grown in bounded steps by a
worker. Figures (outcome mix, per-tool stats, approval latency) are counted by SQL ``GROUP BY``
over each newly covered range plus one pass over the rows naming a proposal, so only counters,
the open proposals and the approval latencies live in Python. The database lives in a temporary
directory deleted by :meth:`ReviewIndex.close` (or when the index is garbage collected).
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from itertools import count as counter
from pathlib import Path
from typing import NamedTuple, overload

from supervisor.analysis.stats import ToolStats
from supervisor.services.review.rows import JsonlSummaries, ReviewFilter, ReviewRow, timestamp
from supervisor.services.review.stats import ReviewStats

__all__ = ["PAGE", "STEP", "ReviewIndex", "RowsView", "Selection"]

#: Rows fetched per page for the screen (a few pages are cached per view).
PAGE = 256
PAGES_CACHED = 8
#: Rows of the index a filtered selection considers per step (bounds one step's memory).
STEP = 50_000
FACETS = ("agent", "thread", "tool", "status")

_COLUMNS = (
    "seq, event_id, at_ts, agent, thread, run, kind, tool, status, reason, summary, blob_ref, "
    "proposal, line_at"
)
_SCHEMA = """
CREATE TABLE event (
    seq INTEGER PRIMARY KEY, event_id INTEGER, at_ts REAL NOT NULL, agent TEXT NOT NULL,
    thread TEXT NOT NULL, run TEXT NOT NULL, kind TEXT NOT NULL, tool TEXT NOT NULL,
    status TEXT NOT NULL, reason TEXT NOT NULL, summary TEXT NOT NULL, blob_ref TEXT,
    proposal TEXT NOT NULL, line_at INTEGER NOT NULL
);
"""
#: Built once the source is read (inserting is faster without them).
_INDEXES = tuple(
    f"CREATE INDEX IF NOT EXISTS event_{column} ON event ({column}, seq)"
    for column in ("agent", "thread", "tool", "status", "kind")
)
_INSERT = f"INSERT INTO event ({_COLUMNS}) VALUES ({', '.join('?' * 14)})"
_Record = tuple[
    int, int | None, float, str, str, str, str, str, str, str, str, str | None, str, int
]


def _record(seq: int, row: ReviewRow) -> _Record:
    return (
        seq, row.event_id, row.at_ts, row.agent, row.thread, row.run, row.kind, row.tool,
        row.status, row.reason, row.summary, row.blob_ref, row.proposal, row.offset,
    )  # fmt: skip


def _row(record: _Record) -> ReviewRow:
    return ReviewRow(
        event_id=record[1], at_ts=record[2], agent=record[3], thread=record[4], run=record[5],
        kind=record[6], tool=record[7], status=record[8], reason=record[9], summary=record[10],
        blob_ref=record[11], proposal=record[12], offset=record[13],
    )  # fmt: skip


def _where(review_filter: ReviewFilter) -> tuple[str, list[object]]:
    """SQL conditions (each starting with `` AND``) and parameters of ``review_filter``."""
    parts: list[str] = []
    params: list[object] = []
    for column in FACETS:
        value = getattr(review_filter, column)
        if value:
            parts.append(f"{column} = ?")
            params.append(value)
    if review_filter.approvals_only:
        parts.append("kind = 'approval'")
    if review_filter.since is not None:
        parts.append("at_ts >= ?")
        params.append(timestamp(review_filter.since))
    if review_filter.until is not None:
        parts.append("at_ts <= ?")
        params.append(timestamp(review_filter.until))
    if review_filter.text:  # last: the other conditions are cheaper
        parts.append("review_match(?, agent, thread, kind, tool, status, summary, line_at)")
        params.append(review_filter.text.lower())
    return "".join(f" AND {part}" for part in parts), params


class Selection:
    """The rows passing one filter: every row, or a table of positions grown step by step.

    ``covered`` is the last row number considered, ``count`` the rows selected so far and
    ``stats`` their figures (read them under ``stats_lock`` while the selection grows).
    """

    def __init__(self, review_filter: ReviewFilter, table: str | None) -> None:
        self.filter = review_filter
        self.table = table
        self.covered = 0
        self.count = 0
        self.stats = ReviewStats()
        self.lock = threading.Lock()
        self.stats_lock = threading.Lock()
        self.dropped = False
        self._where, self._params = _where(review_filter)

    def advance(
        self,
        connection: sqlite3.Connection,
        upto: int,
        cancelled: Callable[[], bool] = lambda: False,
        on_step: Callable[[], None] = lambda: None,
    ) -> bool:
        """Consider rows up to number ``upto`` in steps of :data:`STEP`; False if cancelled."""
        with self.lock:
            while self.covered < upto:
                if cancelled() or self.dropped:
                    return False
                low, high = self.covered, min(upto, self.covered + STEP)
                if self.table is None:
                    found = high - low
                    source, params = "event WHERE seq > ? AND seq <= ?", [low, high]
                else:
                    found = self._insert(connection, low, high)
                    source = f"event WHERE seq IN (SELECT seq FROM {self.table} WHERE pos > ?)"
                    params = [self.count]
                delta = _figures(connection, source, params)
                with self.stats_lock:
                    self._merge(delta, found)
                self.covered = high
                self.count += found
                on_step()
        return True

    def _insert(self, connection: sqlite3.Connection, low: int, high: int) -> int:
        connection.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} (pos INTEGER PRIMARY KEY, seq)"
        )
        seqs = connection.execute(
            f"SELECT seq FROM event WHERE seq > ? AND seq <= ?{self._where} ORDER BY seq",
            [low, high, *self._params],
        ).fetchall()
        start = self.count + 1
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.executemany(
                f"INSERT INTO {self.table} (pos, seq) VALUES (?, ?)",
                ((start + number, seq) for number, (seq,) in enumerate(seqs)),
            )
        finally:
            connection.execute("COMMIT")
        return len(seqs)

    def _merge(self, delta: _Figures, found: int) -> None:
        self.stats.events += found
        for kind, tool, status, times in delta.counts:
            self.stats.count(kind, tool, status, times)
        for proposal, kind, status, at_ts in delta.proposals:
            self.stats.proposal_event(proposal, kind, status, at_ts)


class _Figures(NamedTuple):
    """Counts of one range: ``(kind, tool, status, n)`` plus the rows naming a proposal."""

    counts: list[tuple[str, str, str, int]]
    proposals: list[tuple[str, str, str, float]]


def _figures(connection: sqlite3.Connection, source: str, params: Sequence[object]) -> _Figures:
    counts = connection.execute(
        f"SELECT kind, tool, status, count(*) FROM {source} "
        "AND kind IN ('tool_result', 'tool_call', 'approval') GROUP BY kind, tool, status "
        "ORDER BY min(seq)",  # first seen first, as counting row by row would
        params,
    ).fetchall()
    proposals = connection.execute(
        f"SELECT proposal, kind, status, at_ts FROM {source} AND proposal != '' ORDER BY seq",
        params,
    ).fetchall()
    return _Figures(counts, proposals)


class RowsView(Sequence[ReviewRow]):
    """The rows of a selection, read page by page from the index (a few pages cached)."""

    def __init__(self, index: ReviewIndex, selection: Selection) -> None:
        self.source = index
        self.selection = selection
        self._pages: OrderedDict[int, list[ReviewRow]] = OrderedDict()

    def __len__(self) -> int:
        return self.selection.count

    @overload
    def __getitem__(self, key: int) -> ReviewRow: ...
    @overload
    def __getitem__(self, key: slice) -> list[ReviewRow]: ...
    def __getitem__(self, key: int | slice) -> ReviewRow | list[ReviewRow]:
        if isinstance(key, slice):
            return [self[position] for position in range(*key.indices(len(self)))]
        size = len(self)
        position = key + size if key < 0 else key
        if not 0 <= position < size:
            raise IndexError(key)
        number, within = divmod(position, PAGE)
        page = self._pages.get(number)
        if page is None or within >= len(page):
            page = self._pages[number] = self.source.fetch(self.selection, number * PAGE, PAGE)
            if len(self._pages) > PAGES_CACHED:
                self._pages.popitem(last=False)
        self._pages.move_to_end(number)
        return page[within]


class ReviewIndex:
    """Rows of a source in a temporary SQLite database, plus facets and figures.

    :meth:`add` is called by one indexing thread; :meth:`fetch`, :meth:`next_approval` and
    :meth:`select` may be called from another (the UI) thread; a :class:`Selection` is grown by
    a worker with its own :meth:`connect`.
    """

    def __init__(self, summaries: JsonlSummaries | None = None) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="supervisor-review-")
        self.path = Path(self._folder.name) / "index.db"
        self.summaries = summaries
        self.count = 0
        self.complete = False
        self.closed = False
        self.facets: dict[str, set[str]] = {name: set() for name in FACETS}
        self._last_ts: float | None = None
        self._tables = counter(1)
        self._retired: list[Selection] = []
        self._write_lock = threading.Lock()
        self._facets_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._write = self.connect()
        self._write.executescript(_SCHEMA)
        self._read = self.connect()
        self.everything = Selection(ReviewFilter(), None)

    def connect(self) -> sqlite3.Connection:
        """A new connection to the index (autocommit, WAL, the search function registered)."""
        connection = sqlite3.connect(
            self.path, timeout=60, isolation_level=None, check_same_thread=False
        )
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=OFF")
        reader = None if self.summaries is None else JsonlSummaries(self.summaries.path)

        def match(needle: str, *values: object) -> bool:
            *fields, summary, line_at = values
            if any(needle in str(value).lower() for value in fields):
                return True
            offset = int(line_at) if isinstance(line_at, int) else -1
            if offset >= 0 and reader is not None:
                return needle in reader.summary(offset).lower()
            return needle in str(summary).lower()

        connection.create_function("review_match", 8, match, deterministic=True)
        return connection

    @property
    def rows(self) -> RowsView:
        """Every indexed row, in timeline order."""
        return RowsView(self, self.everything)

    @property
    def stats(self) -> ReviewStats:
        """Figures of every indexed row."""
        return self.everything.stats

    @property
    def tools(self) -> dict[str, ToolStats]:
        """Per-tool statistics of every indexed row."""
        return self.everything.stats.tools

    @property
    def last_at(self) -> datetime | None:
        """Time of the latest indexed event."""
        return None if self._last_ts is None else datetime.fromtimestamp(self._last_ts, UTC)

    def summary_of(self, row: ReviewRow) -> str:
        """The summary of ``row`` (read back from a JSONL line when needed)."""
        if row.offset >= 0 and self.summaries is not None:
            return self.summaries.summary(row.offset)
        return row.summary

    def add(self, rows: Iterable[ReviewRow]) -> None:
        """Index a chunk (rows in timeline order); the figures of every row follow."""
        chunk = list(rows)
        with self._write_lock:
            if self.closed or not chunk:
                return
            self._write.execute("BEGIN IMMEDIATE")
            try:
                self._write.executemany(
                    _INSERT, (_record(self.count + n, row) for n, row in enumerate(chunk, 1))
                )
            finally:
                self._write.execute("COMMIT")
            with self._facets_lock:
                for row in chunk:
                    for name in FACETS:
                        value: str = getattr(row, name)
                        if value:
                            self.facets[name].add(value)
            latest = max(row.at_ts for row in chunk)
            self._last_ts = latest if self._last_ts is None else max(self._last_ts, latest)
            self.count += len(chunk)
            self.everything.advance(self._write, self.count)

    def facet(self, name: str) -> list[str]:
        """The distinct non-empty values of column ``name`` (``agent``, ``thread``, ...)."""
        with self._facets_lock:
            return sorted(self.facets[name])

    def finish(self) -> None:
        """Build the indexes of the filter columns (once the source is read)."""
        with self._write_lock:
            if not self.closed:
                for statement in _INDEXES:
                    self._write.execute(statement)

    def selection(self, review_filter: ReviewFilter) -> Selection:
        """A new, empty selection of the rows passing ``review_filter`` (grow it with advance)."""
        if review_filter == ReviewFilter():
            return self.everything
        return Selection(review_filter, f"selection_{next(self._tables)}")

    def retire(self, selection: Selection) -> None:
        """Mark a selection no longer shown; its table is dropped by :meth:`drop_retired`."""
        if selection.table is not None:
            self._retired.append(selection)

    def drop_retired(self, connection: sqlite3.Connection) -> None:
        """Drop the tables of retired selections (waits for a step growing one to end)."""
        while self._retired:
            selection = self._retired.pop()
            with selection.lock:
                selection.dropped = True
                connection.execute(f"DROP TABLE IF EXISTS {selection.table}")

    def fetch(self, selection: Selection, start: int, limit: int) -> list[ReviewRow]:
        """Rows at positions ``start`` .. ``start + limit - 1`` of ``selection``."""
        end = min(start + limit, selection.count)
        if end <= start:
            return []
        if selection.table is None:
            query = f"SELECT {_COLUMNS} FROM event WHERE seq > ? AND seq <= ? ORDER BY seq"
        else:
            query = (
                f"SELECT {_COLUMNS} FROM {selection.table} JOIN event USING (seq) "
                "WHERE pos > ? AND pos <= ? ORDER BY pos"
            )
        with self._read_lock:
            return [_row(record) for record in self._read.execute(query, (start, end))]

    def next_approval(self, selection: Selection, after: int) -> int | None:
        """Position of the first approval row of ``selection`` after position ``after``."""
        if selection.count == 0 or selection.stats.approvals == 0:
            return None  # (also spares a scan of the whole selection)
        if selection.table is None:
            query = (
                "SELECT seq FROM event WHERE kind = 'approval' AND seq > ? AND seq <= ? "
                "ORDER BY seq"
            )
        else:
            query = (
                f"SELECT pos FROM {selection.table} JOIN event USING (seq) "
                "WHERE kind = 'approval' AND pos > ? AND pos <= ? ORDER BY pos"
            )
        with self._read_lock:
            found = self._read.execute(f"{query} LIMIT 1", (after + 1, selection.count)).fetchall()
        return int(found[0][0]) - 1 if found else None

    def select(self, review_filter: ReviewFilter, limit: int | None = None) -> list[ReviewRow]:
        """Rows passing ``review_filter`` in timeline order (at most ``limit``), read at once."""
        where, params = _where(review_filter)
        query = f"SELECT {_COLUMNS} FROM event WHERE seq <= ?{where} ORDER BY seq LIMIT ?"
        connection = self.connect()
        try:
            records = connection.execute(query, [self.count, *params, limit or -1])
            return [_row(record) for record in records]
        finally:
            connection.close()

    def close(self) -> None:
        """Close the database and delete its directory (idempotent)."""
        with self._write_lock:
            if self.closed:
                return
            self.closed = True
            self.everything.dropped = True
            with self._read_lock:
                self._read.close()
            self._write.close()
        if self.summaries is not None:
            self.summaries.close()
        self._folder.cleanup()
