"""A forged preview, size or media type beside a blob is never shown as verified.

The digest covers only the content; the other columns of the blob row can be rewritten by
anyone who can write the ledger file. The detail pane and the result viewer show what the
verified content says, not what the row says.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from tui_helpers import wait_for

from screens.app import make_app
from screens.blob_screen import BlobScreen
from screens.main_screen import MainScreen
from screens.widgets.detail.detail_pane import DetailPane
from screens.widgets.trace.trace_view import TraceView
from supervisor.ledger.models import TraceEvent
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

CONTENT = b'{"rows": ["genuine-row-1", "genuine-row-2"]}'
FORGED_PREVIEW = "ALL CLEAR: nothing to review"


def _forge(provider: SQLModelProvider) -> str:
    ledger = provider.ledger
    blob = ledger.put_blob(CONTENT, "application/json")
    with provider.engine.begin() as connection:
        connection.execute(
            sa.text(
                "UPDATE blob SET preview = :preview, size = 7, media_type = 'image/png' "
                "WHERE sha256 = :digest"
            ),
            {"preview": FORGED_PREVIEW, "digest": blob.sha256},
        )
    ledger.append_trace(
        [
            TraceEvent(
                at=ledger.clock.now(),
                agent_id="a",
                thread_id="t",
                run_id="r",
                kind="tool_result",
                tool="export",
                outcome_status="success",
                blob_ref=f"sha256:{blob.sha256}",
            )
        ]
    )
    return blob.sha256


def test_the_ledger_derives_preview_size_and_type_from_the_verified_content(
    provider: SQLModelProvider,
) -> None:
    digest = _forge(provider)
    blob = provider.ledger.get_blob(digest)
    assert blob is not None
    assert (blob.size, blob.media_type) == (len(CONTENT), "application/json")
    assert blob.preview == CONTENT.decode()
    # A declared type the content does not bear out is not kept either.
    assert provider.ledger.put_blob(b"plain words", "application/json").media_type == ("text/plain")
    assert provider.ledger.put_blob(b"\xff\xfe", "text/plain").media_type == (
        "application/octet-stream"
    )


async def test_detail_pane_and_viewer_show_the_content_not_the_forged_row(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    _forge(provider)
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        trace = screen.query_one(TraceView)
        await wait_for(pilot, lambda: len(trace.events) == 1)
        await pilot.press("t", "up")
        detail = screen.query_one(DetailPane)
        blob_line = detail.query_one("#detail-blob")
        await wait_for(pilot, lambda: "integrity ok" in str(blob_line.render()))
        shown = str(blob_line.render())
        assert FORGED_PREVIEW not in shown and "image/png" not in shown
        assert "genuine-row-1" in shown and f"{len(CONTENT)} bytes" in shown

        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, BlobScreen))
        viewer: Any = app.screen
        header = viewer.query_one("#blob-header")
        await wait_for(pilot, lambda: "integrity verified" in str(header.render()))
        shown = str(header.render())
        assert f"{len(CONTENT)} bytes" in shown and "application/json" in shown
        assert "image/png" not in shown and " 7 bytes" not in shown
