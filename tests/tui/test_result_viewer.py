"""The result viewer pretty-prints JSON (``j``: the raw text), and ``/`` searches what is shown:
``n`` / ``N`` move between matching lines across pages, a search that finds nothing says so,
hidden characters are escaped in both modes and are found by their escapes."""

from __future__ import annotations

import json
from typing import Any

from tui_helpers import wait_for

from screens.app import make_app
from screens.blob_screen import BlobScreen
from screens.main_screen import MainScreen
from screens.widgets.trace.trace_view import TraceView
from supervisor.ledger.models import TraceEvent
from supervisor.services.identity import ApproverIdentity
from supervisor.services.result_view import PAGE_LINES, ResultView
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

ROWS = [{"sku": f"SKU-{n:05d}", "name": f"widget {n}"} for n in range(1200)]
DOCUMENT = {"rows": ROWS, "note": "evil\u202etxt.exe"}


def _visible(log: Any) -> list[str]:
    top = int(log.scroll_y)
    return list(log.lines[top : top + log.scrollable_content_region.height])


def test_pages_and_search_of_a_view() -> None:
    content = json.dumps(DOCUMENT, separators=(",", ":")).encode()
    pretty = ResultView(content)
    assert pretty.mode == "pretty JSON" and len(pretty.pages) == 3  # 4,805 lines
    assert pretty.pages[0][:3] == ["{", '  "rows": [', "    {"]
    assert all(len(page) <= PAGE_LINES for page in pretty.pages)
    (found,) = pretty.search("sku-01100")
    assert pretty.pages[found.page][found.line] == '      "sku": "SKU-01100",'
    (bidi,) = pretty.search("\\u202e")
    assert "\u202e" not in "".join(pretty.pages[bidi.page])
    raw = ResultView(content, pretty=False)
    assert raw.mode == "raw JSON" and raw.pages[0][0].startswith('{"rows":[{"sku"')
    assert len(raw.search("SKU-01100")) == 1
    text = ResultView(b"line one\nline\x1b[2J two")
    assert text.mode == "text" and text.pages == [["line one", "line\\u001b[2J two"]]
    assert text.search("nothing") == []


async def test_the_viewer_pretty_prints_searches_and_switches_to_raw(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    blob = ledger.put_blob(json.dumps(DOCUMENT).encode(), "application/json")
    ledger.append_trace([TraceEvent(
        at=ledger.clock.now(), agent_id="a", thread_id="t", run_id="r", kind="tool_result",
        tool="export", outcome_status="success", blob_ref=f"sha256:{blob.sha256}",
    )])  # fmt: skip
    app = make_app(settings, ledger=ledger, identity=identity)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_for(pilot, lambda: len(screen.query_one(TraceView).events) == 1)
        await pilot.press("t", "up", "o")
        await wait_for(pilot, lambda: isinstance(app.screen, BlobScreen))
        viewer: Any = app.screen
        header = viewer.query_one("#blob-header")
        log = viewer.query_one("#blob-log")
        await wait_for(pilot, lambda: "pretty JSON  page 1/3" in str(header.render()))
        assert log.lines[:2] == ["{", '  "rows": [']

        await pilot.press("slash", *"sku-01100", "enter")
        await wait_for(pilot, lambda: "match 1/1" in str(header.render()))
        assert "page 3/3" in str(header.render())
        assert log.lines[int(log.scroll_y)] == '      "sku": "SKU-01100",'  # at the top

        await pilot.press("slash", *"widget 11", "enter")  # widget 11, 110-119, 1100-1199
        await wait_for(pilot, lambda: "match 1/111" in str(header.render()))
        await pilot.press("N")
        await wait_for(pilot, lambda: "match 111/111" in str(header.render()))
        assert '      "name": "widget 1199"' in _visible(log)
        await pilot.press("n")
        await wait_for(pilot, lambda: "match 1/111" in str(header.render()))
        assert "page 1/3" in str(header.render())

        await pilot.press("slash", *"no such thing", "enter")
        await wait_for(pilot, lambda: "'no such thing': no match" in str(header.render()))

        await pilot.press("slash", *"\\u202e/", "enter")  # "/" types while searching
        await wait_for(pilot, lambda: "'\\\\u202e/': no match" in str(header.render()))
        await pilot.press("slash", *"\\u202e", "enter")
        await wait_for(pilot, lambda: "match 1/1" in str(header.render()))
        assert '  "note": "evil\\u202etxt.exe"' in _visible(log)

        await pilot.press("j")
        await wait_for(pilot, lambda: "raw JSON  page 1/1" in str(header.render()))
        assert log.lines[0].startswith('{"rows": [{"sku": "SKU-00000"')
        assert "\u202e" not in "".join(log.lines)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
