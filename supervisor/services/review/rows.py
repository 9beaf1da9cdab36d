"""Offline review of a trace: read a ledger or an exported JSONL file in chunks, and filter.

Sources are read lazily in chunks so a UI can show the first screen while the rest is indexed
(into a temporary SQLite database, :mod:`supervisor.services.review.index`). A JSONL row keeps
the byte offset of its line instead of a summary (read back on demand for the rows on screen),
so the whole file is never held in memory.
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from supervisor.ledger.models import TraceEvent
from supervisor.services.rendering import visible_escapes

__all__ = [
    "CHUNK",
    "FIRST_CHUNK",
    "JsonlSummaries",
    "ReviewFilter",
    "ReviewRow",
    "iter_source",
    "summaries_for",
]

#: Rows read per chunk while indexing in the background (bounds the memory of one read).
CHUNK = 5_000
#: Rows in the first chunk: about one screen, so it is shown before the rest is read.
FIRST_CHUNK = 200
SUMMARY_CHARS = 160
#: JSONL summaries kept after being read back for the screen.
SUMMARY_CACHE = 4_096
#: The suffixes a review reads as a JSONL trace; any other path is taken for a ledger file.
TRACE_SUFFIXES = (".jsonl", ".json", ".ndjson")

SummaryOf = Callable[["ReviewRow"], str]


def _name(value: str | None) -> str:
    return sys.intern(value) if value else ""


def timestamp(at: datetime) -> float:
    """Seconds since the epoch of ``at`` (naive times are UTC)."""
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).timestamp()


def _summary(payload: dict[str, object]) -> str:
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    return visible_escapes(text[:SUMMARY_CHARS])


@dataclass(frozen=True, slots=True)
class ReviewRow:
    """One trace event as the review timeline shows it.

    ``offset`` is the byte offset of the event's line in a JSONL source (``-1`` for a ledger);
    such rows leave ``summary`` empty and :class:`JsonlSummaries` reads it back.
    """

    event_id: int | None
    at_ts: float
    agent: str
    thread: str
    run: str
    kind: str
    tool: str
    status: str
    reason: str
    summary: str
    blob_ref: str | None = None
    proposal: str = ""
    offset: int = -1

    @property
    def at(self) -> datetime:
        """When the event happened (UTC)."""
        return datetime.fromtimestamp(self.at_ts, UTC)

    @classmethod
    def from_event(cls, event: TraceEvent, offset: int = -1) -> ReviewRow:
        """A row from a trace event; the payload becomes a short, escaped summary.

        With an ``offset`` (a JSONL line) the summary is left out and read back on demand.
        """
        proposal = event.payload.get("proposal_id")
        return cls(
            event_id=event.event_id,
            at_ts=timestamp(event.at),
            agent=_name(event.agent_id),
            thread=_name(event.thread_id),
            run=_name(event.run_id),
            kind=_name(event.kind),
            tool=_name(event.tool),
            status=_name(event.outcome_status),
            reason=_name(event.reason_code),
            summary="" if offset >= 0 else _summary(event.payload),
            blob_ref=event.blob_ref,
            proposal=proposal if isinstance(proposal, str) else "",
            offset=offset,
        )

    def matches(self, text: str, summary: str | None = None) -> bool:
        """Case-insensitive search over the visible fields (``summary`` when read back)."""
        needle = text.lower()
        shown = self.summary if summary is None else summary
        return any(
            needle in value.lower()
            for value in (self.agent, self.thread, self.kind, self.tool, self.status, shown)
        )


@dataclass(frozen=True)
class ReviewFilter:
    """Timeline filters; empty strings and ``None`` match everything.

    ``since``/``until`` bound the event time (inclusive); ``approvals_only`` keeps the
    ``approval`` rows.
    """

    agent: str = ""
    thread: str = ""
    tool: str = ""
    status: str = ""
    text: str = ""
    since: datetime | None = None
    until: datetime | None = None
    approvals_only: bool = False

    def accepts(self, row: ReviewRow, summary_of: SummaryOf | None = None) -> bool:
        """True when ``row`` passes every filter (``summary_of`` reads a lazy summary)."""
        if self.since is not None and row.at_ts < timestamp(self.since):
            return False
        if self.until is not None and row.at_ts > timestamp(self.until):
            return False
        if not self.text:
            summary_ok = True
        else:
            summary_ok = row.matches(self.text, summary_of(row) if summary_of else None)
        return (
            (not self.agent or row.agent == self.agent)
            and (not self.thread or row.thread == self.thread)
            and (not self.tool or row.tool == self.tool)
            and (not self.status or row.status == self.status)
            and (not self.approvals_only or row.kind == "approval")
            and summary_ok
        )


class JsonlSummaries:
    """Reads the summary of a JSONL row back from its line, with a small LRU cache."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: BinaryIO | None = None
        self._cache: OrderedDict[int, str] = OrderedDict()

    def summary(self, offset: int) -> str:
        """The escaped summary of the event whose line starts at ``offset``."""
        cached = self._cache.get(offset)
        if cached is not None:
            self._cache.move_to_end(offset)
            return cached
        if self._handle is None:
            self._handle = self.path.open("rb")
        self._handle.seek(offset)
        try:
            payload = json.loads(self._handle.readline()).get("payload") or {}
        except ValueError:
            payload = {}
        text = _summary(payload if isinstance(payload, dict) else {})
        self._cache[offset] = text
        if len(self._cache) > SUMMARY_CACHE:
            self._cache.popitem(last=False)
        return text

    def close(self) -> None:
        """Close the file (reopened on the next read)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _ledger_url(source: str) -> str | None:
    if "://" in source:
        return source
    path = Path(source)
    if path.suffix in TRACE_SUFFIXES:
        return None
    if not path.is_file():
        raise FileNotFoundError(f"No ledger or trace file at {source}.")
    return f"sqlite:///{path.resolve()}"


def iter_jsonl(
    path: Path, chunk: int = CHUNK, first: int = FIRST_CHUNK
) -> Iterator[list[ReviewRow]]:
    """Rows of an exported JSONL trace (``supervisor traces export``), chunk by chunk.

    The first chunk holds ``first`` rows, the others ``chunk``.

    Raises:
        ValueError: A line is not a trace event (names the line number).
    """
    batch: list[ReviewRow] = []
    size = first
    offset = 0
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            start, offset = offset, offset + len(line)
            if not line.strip():
                continue
            try:
                event = TraceEvent.model_validate_json(line)
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not a trace event ({error}).") from error
            batch.append(ReviewRow.from_event(event, offset=start))
            if len(batch) >= size:
                yield batch
                batch, size = [], chunk
    if batch:
        yield batch


def iter_ledger(
    url: str, chunk: int = CHUNK, first: int = FIRST_CHUNK
) -> Iterator[list[ReviewRow]]:
    """Rows of every trace event in a ledger, chunk by chunk (reads only).

    The first chunk holds ``first`` rows, the others ``chunk``.
    """
    from supervisor.store.provider import SQLModelProvider

    with SQLModelProvider(url, read_only=True) as provider:
        after_id = 0
        size = first
        while True:
            events = provider.ledger.trace_events(after_id=after_id, limit=size)
            if not events:
                return
            after_id = events[-1].event_id or after_id
            yield [ReviewRow.from_event(event) for event in events]
            size = chunk


def iter_source(
    source: str, chunk: int = CHUNK, first: int = FIRST_CHUNK
) -> Iterator[list[ReviewRow]]:
    """Rows of a ledger (file path or SQLAlchemy URL) or a JSONL trace, chunk by chunk.

    The first chunk holds ``first`` rows (one screen), the others ``chunk``.

    Raises:
        FileNotFoundError: The path does not exist.
    """
    url = _ledger_url(source)
    if url is None:
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"No trace file at {source}.")
        return iter_jsonl(path, chunk, first)
    return iter_ledger(url, chunk, first)


def summaries_for(source: str) -> JsonlSummaries | None:
    """A summary reader when ``source`` is a JSONL trace (``None`` for a ledger)."""
    try:
        return None if _ledger_url(source) is not None else JsonlSummaries(Path(source))
    except FileNotFoundError:
        return None
