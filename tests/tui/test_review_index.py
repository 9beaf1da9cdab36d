"""The review index keeps a trace on disk: Python memory stays small whatever the event count."""

from __future__ import annotations

import sqlite3
import tracemalloc
from pathlib import Path

from tui_helpers import generate_trace

from supervisor.services.review.index import PAGES_CACHED, ReviewIndex, RowsView
from supervisor.services.review.rows import ReviewFilter, iter_source, summaries_for
from supervisor.services.review.stats import compute_stats

EVENTS = 40_000


def write_trace(path: Path) -> None:
    with path.open("w") as handle:
        for start in range(0, EVENTS, 5_000):
            handle.writelines(
                event.model_dump_json() + "\n" for event in generate_trace(start + 5_000)[start:]
            )


def test_a_jsonl_trace_is_indexed_on_disk_with_bounded_python_memory(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    write_trace(trace)
    assert trace.stat().st_size > 5_000_000
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        index = ReviewIndex(summaries_for(str(trace)))
        for chunk in iter_source(str(trace)):
            index.add(chunk)
        del chunk
        index.finish()
        retained = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    try:
        # The old in-memory index held ~240 bytes per event (~9.6 MB here).
        assert retained < 500_000, retained
        with sqlite3.connect(index.path) as connection:
            assert connection.execute("SELECT count(*) FROM event").fetchone() == (EVENTS,)
        assert index.count == EVENTS
        assert not any(
            isinstance(value, list | tuple | dict) and len(value) > 100
            for value in vars(index).values()
        )
        rows = index.rows
        assert isinstance(rows, RowsView) and len(rows) == EVENTS
        assert sum(1 for _ in rows) == EVENTS
        assert len(rows._pages) <= PAGES_CACHED
        assert rows[-1].offset > 0 and index.summary_of(rows[-1]) == f'{{"n": {EVENTS - 1}}}'
        assert index.stats.events == EVENTS
        assert sum(index.stats.outcomes.values()) == EVENTS
        assert index.facets["agent"] == {"agent-0", "agent-1", "agent-2"}
    finally:
        index.close()
    assert not index.path.parent.exists()


def test_a_selection_is_a_table_in_the_index_grown_in_steps(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(event.model_dump_json() + "\n" for event in generate_trace(3_000)))
    index = ReviewIndex(summaries_for(str(trace)))
    try:
        for chunk in iter_source(str(trace), chunk=700, first=50):
            index.add(chunk)
        review_filter = ReviewFilter(tool="search_docs", status="error")
        selection = index.selection(review_filter)
        assert selection.table is not None and selection.count == 0
        connection = index.connect()
        try:
            assert selection.advance(connection, index.count)
        finally:
            connection.close()
        expected = index.select(review_filter)
        view = RowsView(index, selection)
        assert len(view) == len(expected) == 200
        assert list(view) == expected
        figures = compute_stats(expected)
        assert selection.stats.outcomes == figures.outcomes == {"error": 200}
        assert selection.stats.events == figures.events
        searched = index.select(ReviewFilter(text='"N": 2999'))  # summaries read back
        assert [row.offset for row in searched] == [index.rows[-1].offset]
        assert index.next_approval(selection, -1) is None
    finally:
        index.close()
