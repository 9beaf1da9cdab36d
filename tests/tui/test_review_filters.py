"""Offline review: time range, jump to approvals, the plots' counts and JSONL streaming."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from tui_helpers import FIXED_NOW, generate_trace, wait_for

from screens.app import make_app
from screens.review_screen import ReviewScreen
from screens.widgets.review.timeline import ReviewTimeline
from supervisor.ledger.clock import ManualClock
from supervisor.ledger.models import TraceEvent
from supervisor.services.review.rows import FIRST_CHUNK, ReviewRow, iter_source
from supervisor.store.provider import SQLModelProvider

SIZE = (160, 45)


def approval_trace() -> list[TraceEvent]:
    """30 tool results plus 4 proposals: pending at second 100+10k, decided k*60 s later."""
    events = generate_trace(30)
    for k in range(4):
        pending_at = FIXED_NOW + timedelta(seconds=100 + 10 * k)
        events.append(
            TraceEvent(
                at=pending_at, agent_id="agent-9", thread_id="t9", kind="approval",
                tool="create_customer", outcome_status="pending", payload={"proposal_id": f"p{k}"},
            )
        )  # fmt: skip
        events.append(
            TraceEvent(
                at=pending_at + timedelta(seconds=60 * (k + 1)), agent_id="agent-9",
                thread_id="t9", kind="approval", tool="create_customer",
                outcome_status="rejected" if k == 3 else "approved",
                payload={"proposal_id": f"p{k}"},
            )
        )  # fmt: skip
    return sorted(events, key=lambda event: event.at)


def make_ledger(path: Path, events: list[TraceEvent]) -> str:
    with SQLModelProvider(f"sqlite:///{path}", clock=ManualClock(FIXED_NOW)) as provider:
        provider.ledger.append_trace(events)
    return str(path)


def write_jsonl(path: Path, events: list[TraceEvent]) -> str:
    path.write_text("".join(event.model_dump_json() + "\n" for event in events))
    return str(path)


@pytest.fixture(params=["ledger", "jsonl"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "ledger":
        return make_ledger(tmp_path / "review.db", approval_trace())
    return write_jsonl(tmp_path / "trace.jsonl", approval_trace())


async def test_time_range_narrows_the_timeline_and_the_stats(source: str) -> None:
    app = make_app(review_source=source)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        await wait_for(pilot, lambda: screen.index.complete, limit=10)
        timeline = screen.query_one(ReviewTimeline)
        assert len(timeline.rows) == 38
        screen.query_one("#review-to").value = (  # type: ignore[attr-defined]
            (FIXED_NOW + timedelta(seconds=9)).isoformat()
        )
        await wait_for(pilot, lambda: len(timeline.rows) == 10)
        assert sum(screen.shown_stats.outcomes.values()) == 10
        assert screen.shown_stats.tools["inventory_lookup"].results == 4
        # Relative bounds count back from the last event (second 340).
        screen.query_one("#review-to").value = ""  # type: ignore[attr-defined]
        screen.query_one("#review-from").value = "5m"  # type: ignore[attr-defined]
        await wait_for(pilot, lambda: len(timeline.rows) == 8)
        assert {row.kind for row in timeline.rows} == {"approval"}
        assert screen.shown_stats.outcomes == {}
        screen.query_one("#review-from").value = "yesterday-ish"  # type: ignore[attr-defined]
        await wait_for(pilot, lambda: len(timeline.rows) == 38)
        assert screen.query_one("#review-from").has_class("-invalid")


async def test_jump_to_approvals_moves_the_cursor_and_filters(source: str) -> None:
    app = make_app(review_source=source)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        await wait_for(pilot, lambda: screen.index.complete, limit=10)
        timeline = screen.query_one(ReviewTimeline)
        timeline.focus()
        await pilot.press("n")
        assert timeline.cursor is not None
        first = timeline.rows[timeline.cursor]
        assert (first.kind, first.proposal, first.status) == ("approval", "p0", "pending")
        assert timeline.rows[: timeline.cursor] and all(
            row.kind != "approval" for row in timeline.rows[: timeline.cursor]
        )
        await pilot.press("n")
        assert timeline.rows[timeline.cursor].proposal == "p1"
        await pilot.press("a")
        await wait_for(pilot, lambda: len(timeline.rows) == 8)
        assert all(row.kind == "approval" for row in timeline.rows)
        await pilot.press("a")
        await wait_for(pilot, lambda: len(timeline.rows) == 38)


async def test_plots_show_the_outcome_mix_and_approval_latency(source: str) -> None:
    app = make_app(review_source=source)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        await wait_for(pilot, lambda: screen.index.complete, limit=10)
        stats = screen.shown_stats
        # generate_trace cycles success, success, empty, fallback, error over 30 results.
        assert stats.outcomes == {"success": 12, "empty": 6, "fallback": 6, "error": 6}
        assert sorted(stats.latencies) == [60.0, 120.0, 180.0, 240.0]
        assert stats.latency_histogram()[3] == ("1-10m", 4)
        text = str(screen.query_one("#review-stats").render())
        assert "outcome mix  (30 tool results)" in text
        assert "success" in text and "     12 (40.0%)" in text
        assert "approval latency  n=4  p50 120.0s  p95 240.0s" in text
        assert "1-10m" in text and "      4 (100.0%)" in text
        screen.query_one("#filter-tool").value = "search_docs"  # type: ignore[attr-defined]
        await wait_for(pilot, lambda: screen.shown_stats.events == 10)
        assert set(screen.shown_stats.tools) == {"search_docs"}
        assert screen.shown_stats.tools["search_docs"].results == 10
        assert "(no decided approvals)" in str(screen.query_one("#review-stats").render())


async def test_a_jsonl_trace_shows_its_first_screen_before_it_is_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "big.jsonl"
    with trace.open("w") as handle:
        for start in range(0, 20_000, 2_000):
            handle.writelines(
                event.model_dump_json() + "\n" for event in generate_trace(start + 2_000)[start:]
            )
    assert trace.stat().st_size > 3_000_000
    app = make_app(review_source=str(trace))
    seen: list[tuple[int, bool, str]] = []

    def watched(path: str) -> Iterator[list[ReviewRow]]:
        chunks = iter_source(path)
        yield next(chunks)
        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        timeline = screen.query_one(ReviewTimeline)
        seen.append((len(timeline.rows), screen.index.complete, timeline.render_line(0).text))
        yield from chunks

    monkeypatch.setattr("supervisor.services.review.service.iter_source", watched)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        await wait_for(pilot, lambda: screen.index.complete, limit=30)
        assert [(rows, complete) for rows, complete, _ in seen] == [(FIRST_CHUNK, False)]
        assert seen[0][2].rstrip().endswith('{"')  # the summary, read back from the file
        assert screen.index.summary_of(screen.index.rows[0]) == '{"n": 0}'
        assert all(row.summary == "" and row.offset >= 0 for row in screen.index.rows)
        assert len(screen.query_one(ReviewTimeline).rows) == 20_000
        await pilot.press("slash", *'"n": 19999')
        await wait_for(pilot, lambda: len(screen.query_one(ReviewTimeline).rows) == 1)
