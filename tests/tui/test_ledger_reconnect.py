"""The TUI across a real PostgreSQL restart: a banner while the server is down, then it
reconnects and catches up from its cursors, so the proposals and trace events written while
it was away, or right after, all appear.

The test runs its own throwaway server (stopping it disturbs no other test) and stops it with
``pg_ctl -m fast``, which terminates every client connection as a restart does. The writer is
a second provider with its own engine, as an agent on another host would be.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from support.postgres import PostgresCluster
from tui_helpers import drawn_text, main_screen, propose, record_notifications, wait_for

from screens.app import make_app
from screens.widgets.inbox.inbox_pane import InboxPane
from screens.widgets.trace.trace_view import TraceView
from supervisor.ledger.models import TraceEvent
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

WAIT_S = 60.0
"""Upper bound on waiting for something that should happen (not a timing assertion)."""


@pytest.fixture
def server(pg_cluster: PostgresCluster) -> Iterator[PostgresCluster]:
    if pg_cluster.external:
        pytest.skip("the test cannot restart an external PostgreSQL server")
    cluster = PostgresCluster()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def url(server: PostgresCluster) -> str:
    return server.create_database("tui_reconnect")


def _provider(url: str) -> Iterator[SQLModelProvider]:
    provider = SQLModelProvider(url)
    try:
        yield provider
    finally:
        provider.close()


@pytest.fixture
def tui_provider(url: str) -> Iterator[SQLModelProvider]:
    yield from _provider(url)


@pytest.fixture
def writer(url: str, tui_provider: SQLModelProvider) -> Iterator[SQLModelProvider]:
    yield from _provider(url)


async def test_the_tui_shows_a_banner_while_postgres_is_down_and_catches_up_after(
    server: PostgresCluster,
    tui_provider: SQLModelProvider,
    writer: SQLModelProvider,
    settings: SupervisorSettings,
    identity: ApproverIdentity,
) -> None:
    before = propose(writer.ledger, tool="before_restart")
    app = make_app(settings, ledger=tui_provider.ledger, identity=identity)
    notes = record_notifications(app)
    async with app.run_test(size=(150, 45)) as pilot:
        screen = main_screen(app)
        inbox = screen.query_one(InboxPane)
        trace = screen.query_one(TraceView)
        banner = screen.query_one("#ledger-banner")
        await wait_for(pilot, lambda: before.proposal_id in inbox.proposals, WAIT_S)
        assert not banner.has_class("-down") and banner.display is False

        await asyncio.to_thread(server.stop_server)
        await wait_for(pilot, lambda: banner.has_class("-down"), WAIT_S)
        await pilot.pause(0.1)
        assert "Ledger unreachable since" in drawn_text(banner)
        assert not screen.connection.status().connected

        await asyncio.to_thread(server.start_server)
        # Written the moment the server is back, before the TUI may have noticed: the TUI
        # must find them from its cursors, not from a wake-up it may have missed.
        after = propose(writer.ledger, tool="after_restart")
        writer.ledger.append_trace(
            [TraceEvent(at=datetime.now(UTC), agent_id="crm-agent", kind="tool_call", tool="x")]
        )
        await wait_for(pilot, lambda: after.proposal_id in inbox.proposals, WAIT_S)
        await wait_for(pilot, lambda: any(e.tool == "x" for e in trace.events), WAIT_S)
        await wait_for(pilot, lambda: not banner.has_class("-down"), WAIT_S)
        assert screen.connection.status().connected
        assert any(note.startswith("Reconnected after ") for note in notes), notes
        assert before.proposal_id in inbox.proposals  # nothing lost from before either

        # And it keeps following: the next proposal arrives as usual.
        third = propose(writer.ledger, tool="later_still")
        await wait_for(pilot, lambda: third.proposal_id in inbox.proposals, WAIT_S)
