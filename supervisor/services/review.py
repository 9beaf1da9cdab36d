"""Offline review of a trace: read a ledger or an exported JSONL file in chunks, index, filter.

Sources are read lazily in chunks so a UI can show the first screen while the rest is indexed.
Rows are compact (no payloads beyond a short summary) to keep memory bounded by the row count.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from supervisor.ledger.models import TraceEvent
from supervisor.services.rendering import visible_escapes

#: Rows read per chunk while indexing in the background (bounds the memory of one read).
CHUNK = 5_000
#: Rows in the first chunk: about one screen, so it is shown before the rest is read.
FIRST_CHUNK = 200
SUMMARY_CHARS = 160


@dataclass(frozen=True, slots=True)
class ReviewRow:
    """One trace event as the review timeline shows it."""

    event_id: int | None
    at: datetime
    agent: str
    thread: str
    run: str
    kind: str
    tool: str
    status: str
    reason: str
    summary: str
    blob_ref: str | None = None

    @classmethod
    def from_event(cls, event: TraceEvent) -> ReviewRow:
        """A row from a trace event; the payload becomes a short, escaped summary."""
        summary = json.dumps(event.payload, ensure_ascii=False, sort_keys=True)
        return cls(
            event_id=event.event_id,
            at=event.at,
            agent=event.agent_id or "",
            thread=event.thread_id or "",
            run=event.run_id or "",
            kind=event.kind,
            tool=event.tool or "",
            status=event.outcome_status or "",
            reason=event.reason_code or "",
            summary=visible_escapes(summary[:SUMMARY_CHARS]),
            blob_ref=event.blob_ref,
        )

    def matches(self, text: str) -> bool:
        """Case-insensitive search over the visible fields."""
        needle = text.lower()
        return any(
            needle in value.lower()
            for value in (self.agent, self.thread, self.kind, self.tool, self.status, self.summary)
        )


@dataclass(frozen=True)
class ReviewFilter:
    """Timeline filters; empty strings match everything."""

    agent: str = ""
    thread: str = ""
    tool: str = ""
    status: str = ""
    text: str = ""

    def accepts(self, row: ReviewRow) -> bool:
        """True when ``row`` passes every filter."""
        return (
            (not self.agent or row.agent == self.agent)
            and (not self.thread or row.thread == self.thread)
            and (not self.tool or row.tool == self.tool)
            and (not self.status or row.status == self.status)
            and (not self.text or row.matches(self.text))
        )


@dataclass
class ToolStats:
    """Per-tool counts and outcome mix."""

    tool: str
    calls: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)

    @property
    def usable_ratio(self) -> float:
        """Share of results whose outcome is usable (success, empty, degraded, fallback)."""
        total = sum(self.outcomes.values())
        usable = sum(self.outcomes[s] for s in ("success", "empty", "degraded", "fallback"))
        return usable / total if total else 0.0


class ReviewIndex:
    """All rows of a source plus facets and statistics, grown chunk by chunk."""

    def __init__(self) -> None:
        self.rows: list[ReviewRow] = []
        self.agents: Counter[str] = Counter()
        self.threads: Counter[str] = Counter()
        self.tools: dict[str, ToolStats] = {}
        self.outcomes: Counter[str] = Counter()
        self.complete = False

    def add(self, rows: list[ReviewRow]) -> None:
        """Index a chunk."""
        self.rows.extend(rows)
        for row in rows:
            if row.agent:
                self.agents[row.agent] += 1
            if row.thread:
                self.threads[row.thread] += 1
            if row.status:
                self.outcomes[row.status] += 1
            if row.tool:
                stats = self.tools.setdefault(row.tool, ToolStats(row.tool))
                if row.kind == "tool_call":
                    stats.calls += 1
                if row.status:
                    stats.outcomes[row.status] += 1

    def select(self, review_filter: ReviewFilter, limit: int | None = None) -> list[ReviewRow]:
        """Rows passing ``review_filter`` in timeline order (at most ``limit``)."""
        selected: list[ReviewRow] = []
        for row in self.rows:
            if review_filter.accepts(row):
                selected.append(row)
                if limit is not None and len(selected) >= limit:
                    break
        return selected


def _ledger_url(source: str) -> str | None:
    if "://" in source:
        return source
    path = Path(source)
    if path.suffix in (".jsonl", ".json", ".ndjson"):
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
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                event = TraceEvent.model_validate_json(line)
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not a trace event ({error}).") from error
            batch.append(ReviewRow.from_event(event))
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
    from supervisor.provider import SQLModelProvider

    with SQLModelProvider(url) as provider:
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
