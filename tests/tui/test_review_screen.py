"""Offline review of a generated ledger and of an exported JSONL trace."""

from __future__ import annotations

from pathlib import Path

from tui_helpers import FIXED_NOW, generate_trace, wait_for

from screens.app import make_app
from screens.review_screen import ReviewScreen
from screens.widgets.review.timeline import ReviewTimeline
from supervisor.ledger.clock import ManualClock
from supervisor.provider import SQLModelProvider


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
        await wait_for(pilot, lambda: all(row.status == "error" for row in timeline.rows))
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
