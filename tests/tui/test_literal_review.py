"""The offline review and the blob viewer draw names from a trace literally and escaped, and a
malformed trace file is reported on screen instead of killing the app."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from textual.widgets import Select, Static
from tui_helpers import FIXED_NOW, HOSTILE, drawn_text, expect_drawn, toast_text, wait_for

from screens.app import make_app
from screens.blob_screen import BlobScreen
from screens.main_screen import MainScreen
from screens.review_screen import ReviewScreen
from screens.widgets.detail.detail_pane import DetailPane
from screens.widgets.review.timeline import ReviewTimeline
from supervisor.ledger.models import TraceEvent
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (240, 50)


def _hostile_events() -> list[TraceEvent]:
    return [
        TraceEvent(
            at=FIXED_NOW + timedelta(seconds=index), agent_id=f"a{text}", thread_id=f"t{text}",
            run_id="r", kind="tool_result", tool=f"k{text}", outcome_status=f"s{text}",
            reason_code=f"c{text}", payload={"message": f"m{text}"},
        )
        for index, text in enumerate(HOSTILE)
    ]  # fmt: skip


def _review(app: object) -> ReviewScreen:
    screen = getattr(app, "screen", None)
    assert isinstance(screen, ReviewScreen)
    return screen


async def test_review_of_a_jsonl_trace_shows_its_names_literally(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(event.model_dump_json() + "\n" for event in _hostile_events()))
    app = make_app(review_source=str(trace))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = _review(app)
        await wait_for(pilot, lambda: screen.index.complete)
        timeline = screen.query_one(ReviewTimeline)
        await wait_for(pilot, lambda: len(timeline.rows) == len(HOSTILE))
        await pilot.pause(0.1)
        # The summary column is not clipped: every payload text is there in full.
        await expect_drawn(pilot, timeline, [f'{{"message": "m{text}"}}' for text in HOSTILE])
        await expect_drawn(
            pilot, timeline, ["a[/]", "t[/]", "k[/]", "s[/]", "c[/]", "k[bold]x[/bo"]
        )
        stats = screen.query_one("#review-stats", Static)
        await expect_drawn(
            pilot, stats, ["k[/]", "s[/] 1", "s[link=https://evil]click[/link] 1", "spay\u202e"]
        )
        # A filter option is a name from the trace too, once chosen it is drawn as the value.
        select: Select[str] = screen.query_one("#filter-agent", Select)
        for value in ("a[/]", "a[@click=app.quit]x[/]", "a\x1b[2J\x1b]0;pwned\x07"):
            select.value = value
            await wait_for(pilot, lambda: len(timeline.rows) == 1)
            await pilot.pause(0.1)
            await expect_drawn(pilot, select.query_one("SelectCurrent #label"), [value[:12]])
        select.clear()
        await wait_for(pilot, lambda: len(timeline.rows) == len(HOSTILE))
        select.expanded = True  # open the agent filter's list of names
        await pilot.pause(0.3)
        overlay = select.query_one("SelectOverlay")
        await expect_drawn(pilot, overlay, [f"a{text}"[:10] for text in HOSTILE])
        assert app.is_running


async def test_a_malformed_jsonl_line_is_reported_literally_and_the_app_keeps_running(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "trace.jsonl"
    good = _hostile_events()[0].model_dump_json()
    trace.write_text(f"{good}\nnot json [/] [bold]x[/bold] \x1b]0;pwned\x07\n")
    app = make_app(review_source=str(trace))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = _review(app)
        status = screen.query_one("#review-status", Static)
        await wait_for(pilot, lambda: "cannot read" in drawn_text(status))
        await wait_for(pilot, lambda: "Review failed" in toast_text(app))
        await pilot.pause(0.2)
        assert app.is_running
        await expect_drawn(pilot, status, [f"cannot read {trace}: {trace}:2"])
        for toast in screen.query("Toast"):
            await expect_drawn(pilot, toast, [])
        words = " ".join(toast_text(app).replace("\u258c", " ").split())  # unwrapped
        assert "input_value=b'not json [/] [bold]x[/bold]" in words, words


async def test_blob_pointer_and_viewer_escape_the_media_type_and_content(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    content = b"row [/] [bold]x[/bold]\n\x1b[2J\x1b]0;pwned\x07\npay\xe2\x80\xaegnp.exe\n"
    blob = provider.ledger.put_blob(content, media_type="text/[/]\x1b[2J[link=https://evil]x")
    ref = f"sha256:{blob.sha256}"
    provider.ledger.append_trace(
        [TraceEvent(at=FIXED_NOW, agent_id="a", kind="tool_result", tool="t", blob_ref=ref)]
    )
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        assert isinstance(app.screen, MainScreen)
        await pilot.press("t", "up")
        detail = app.screen.query_one(DetailPane)
        pointer = detail.query_one("#detail-blob", Static)
        await wait_for(pilot, lambda: "offloaded result" in drawn_text(pointer))
        # The declared media type is not borne out by the content, so the ledger shows what the
        # content is (text/plain); the hostile declaration never reaches the screen.
        await expect_drawn(pilot, pointer, ["text/plain", "preview: row [/]"])
        assert "evil" not in drawn_text(pointer)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, BlobScreen))
        viewer = app.screen
        header = viewer.query_one("#blob-header", Static)
        await wait_for(pilot, lambda: "integrity verified" in drawn_text(header))
        await pilot.pause(0.1)
        await expect_drawn(pilot, header, ["text/plain  integrity verified"])
        assert "evil" not in drawn_text(header)
        await expect_drawn(
            pilot,
            viewer.query_one("#blob-log"),
            ["row [/] [bold]x[/bold]", "\x1b[2J\x1b]0;pwned\x07", "pay\u202egnp.exe"],
        )
        assert app.is_running
