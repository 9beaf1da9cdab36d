"""Offline review of a generated ledger and of an exported JSONL trace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tui_helpers import FIXED_NOW, generate_trace, wait_for

from screens.app import make_app
from screens.review_screen import ReviewScreen
from screens.widgets.review.timeline import ReviewTimeline
from supervisor.ledger.clock import ManualClock
from supervisor.services.review.rows import FIRST_CHUNK, ReviewRow, iter_source
from supervisor.store.provider import SQLModelProvider


def make_ledger(path: Path, count: int) -> str:
    url = f"sqlite:///{path}"
    with SQLModelProvider(url, clock=ManualClock(FIXED_NOW)) as provider:
        provider.ledger.append_trace(generate_trace(count))
    return str(path)


async def test_offline_review_of_a_generated_ledger_filters_and_searches(tmp_path: Path) -> None:
    source = make_ledger(tmp_path / "review.db", 12_000)
    app = make_app(review_source=source)
    async with app.run_test(size=(150, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        await wait_for(pilot, lambda: screen.index.complete, limit=20)
        timeline = screen.query_one(ReviewTimeline)
        assert len(timeline.rows) == 12_000
        assert screen.index.tools["create_customer"].outcomes["error"] > 0
        screen.query_one("#filter-agent").value = "agent-1"  # type: ignore[attr-defined]
        await wait_for(pilot, lambda: len(timeline.rows) == 4_000)
        assert {row.agent for row in timeline.rows} == {"agent-1"}
        screen.query_one("#filter-status").value = "error"  # type: ignore[attr-defined]
        await wait_for(
            pilot,
            lambda: bool(timeline.rows) and all(row.status == "error" for row in timeline.rows),
        )
        assert timeline.rows
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(timeline.rows) == 12_000)
        await pilot.press("slash", *'"n": 11999')
        await wait_for(pilot, lambda: len(timeline.rows) == 1)


async def test_offline_review_reads_an_exported_jsonl(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(e.model_dump_json() + "\n" for e in generate_trace(30)))
    app = make_app(review_source=str(trace))
    async with app.run_test(size=(150, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        await wait_for(pilot, lambda: screen.index.complete)
        assert len(screen.query_one(ReviewTimeline).rows) == 30
        assert "outcome mix" in str(screen.query_one("#review-stats").render())


def test_sources_are_read_in_one_screen_first_then_bounded_chunks(tmp_path: Path) -> None:
    source = make_ledger(tmp_path / "chunks.db", 2_500)
    assert [len(chunk) for chunk in iter_source(source, chunk=1_000, first=100)] == [
        100, 1_000, 1_000, 400,
    ]  # fmt: skip
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(e.model_dump_json() + "\n" for e in generate_trace(250)))
    assert [len(chunk) for chunk in iter_source(str(trace), chunk=100, first=30)] == [
        30, 100, 100, 20,
    ]  # fmt: skip


async def test_the_first_screen_is_painted_before_the_rest_is_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = make_ledger(tmp_path / "first.db", 6_000)
    app = make_app(review_source=source)
    seen_before_second_chunk: list[tuple[int, bool]] = []

    def watched(path: str) -> Iterator[list[ReviewRow]]:
        chunks = iter_source(path)
        yield next(chunks)
        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        timeline = screen.query_one(ReviewTimeline)
        seen_before_second_chunk.append((len(timeline.rows), screen.index.complete))
        yield from chunks

    monkeypatch.setattr("supervisor.services.review.service.iter_source", watched)
    async with app.run_test(size=(150, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        await wait_for(pilot, lambda: screen.index.complete, limit=20)
        assert seen_before_second_chunk == [(FIRST_CHUNK, False)]
        assert len(screen.query_one(ReviewTimeline).rows) == 6_000
        assert "6,000 of 6,000 events shown — indexed" in str(
            screen.query_one("#review-status").render()
        )
