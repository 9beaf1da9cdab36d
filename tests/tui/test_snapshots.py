"""SVG snapshots with fixed data, a fixed clock and a fixed terminal size.

Regenerate after an intended UI change with ``pytest tests/tui --snapshot-update``.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from textual.pilot import Pilot
from tui_helpers import FIXED_NOW, SCHEMA_HASH, generate_trace, wait_for

from screens.app import make_app
from screens.main_screen import MainScreen
from screens.widgets.detail.detail_pane import DetailPane
from screens.widgets.processes.processes_pane import ProcessesPane
from screens.widgets.trace.trace_view import TraceView
from supervisor.ledger.clock import ManualClock
from supervisor.ledger.models import TraceEvent
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (160, 48)
SnapCompare = Callable[..., bool]


@pytest.fixture(autouse=True)
def _numbered_proposal_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Proposal ids are drawn (the inbox's id column, the detail's id row): number them, so the
    picture is the same on every run."""
    numbers = itertools.count(0xA11CE000)
    fake = SimpleNamespace(uuid4=lambda: uuid.UUID(int=next(numbers) << 96))
    monkeypatch.setattr("supervisor.ledger.service.uuid", fake)


def _settings() -> SupervisorSettings:
    return SupervisorSettings(
        poll_timeout=0.05, high_risk_domains=frozenset({"payments"}), now=lambda: FIXED_NOW
    )


def _seed(tmp_path: Path) -> SQLModelProvider:
    clock = ManualClock(FIXED_NOW - timedelta(minutes=5))
    provider = SQLModelProvider(f"sqlite:///{tmp_path / 'snap.db'}", clock=clock)
    ledger = provider.ledger
    ledger.propose(
        "create_customer", SCHEMA_HASH,
        {"name": "Ada\u202eevil", "email": "ada@example.com", "tier": "gold", "tags": ["vip"]},
        owner="crm-agent", user="bob", thread_id="t-1", checkpoint_id="ckpt-0001",
        domains=["crm"], policy_reason="creates a customer record", ttl_seconds=3600,
    )  # fmt: skip
    clock.advance(30)
    ledger.propose(
        "refund", SCHEMA_HASH, {"order": "A-1001", "amount": 125.5},
        owner="billing-agent", thread_id="t-9", domains=["payments"], risk="high",
        policy_reason="moves money", ttl_seconds=600,
    )  # fmt: skip
    return provider


def _seed_trace(provider: SQLModelProvider) -> str:
    content = "sku,name,qty\n" + "".join(f"SKU-{i:05d},widget {i},{i % 17}\n" for i in range(4000))
    blob = provider.ledger.put_blob(content.encode(), "text/csv")
    events = generate_trace(12)
    events.append(
        TraceEvent(
            at=FIXED_NOW,
            agent_id="stock-agent",
            thread_id="t-3",
            run_id="run-2",
            kind="tool_result",
            tool="inventory_export",
            outcome_status="success",
            reason_code="offloaded",
            payload={"rows": 4000, "offloaded": True},
            blob_ref=f"sha256:{blob.sha256}",
        )
    )
    provider.ledger.append_trace(events)
    return blob.sha256


def _identity() -> ApproverIdentity:
    from supervisor.ledger.models import ApproverContext

    context = ApproverContext(os_user="tester", host="testhost", pid=1, via="tui")
    return ApproverIdentity("tester@testhost#test01", "test01", context)


def test_main_screen_with_a_pending_proposal_selected(
    snap_compare: SnapCompare, tmp_path: Path
) -> None:
    provider = _seed(tmp_path)
    app = make_app(_settings(), ledger=provider.ledger, identity=_identity())

    async def ready(pilot: Pilot[Any]) -> None:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_for(pilot, lambda: screen.guard is not None)
        await wait_for(pilot, lambda: bool(screen.query_one(DetailPane).history))
        await wait_for(pilot, lambda: len(screen.query_one(ProcessesPane).process_rows) == 2)
        await pilot.pause(0.2)

    try:
        assert snap_compare(app, terminal_size=SIZE, run_before=ready)
    finally:
        provider.close()


def test_detail_with_a_large_result_pointer(snap_compare: SnapCompare, tmp_path: Path) -> None:
    provider = _seed(tmp_path)
    _seed_trace(provider)
    app = make_app(_settings(), ledger=provider.ledger, identity=_identity())

    async def ready(pilot: Pilot[Any]) -> None:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        trace = screen.query_one(TraceView)
        await wait_for(pilot, lambda: len(trace.events) == 13)
        await pilot.press("t", "up")
        detail = screen.query_one(DetailPane)
        await wait_for(
            pilot, lambda: "integrity ok" in str(detail.query_one("#detail-blob").render())
        )
        await wait_for(pilot, lambda: len(screen.query_one(ProcessesPane).process_rows) == 6)
        await pilot.pause(0.2)

    try:
        assert snap_compare(app, terminal_size=SIZE, run_before=ready)
    finally:
        provider.close()


def test_offline_review(
    snap_compare: SnapCompare, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the title shows the path as given
    Path("trace.jsonl").write_text("".join(e.model_dump_json() + "\n" for e in generate_trace(40)))
    app = make_app(review_source="trace.jsonl")

    async def ready(pilot: Pilot[Any]) -> None:
        from screens.review_screen import ReviewScreen

        screen = app.screen
        assert isinstance(screen, ReviewScreen)
        await wait_for(pilot, lambda: screen.index.complete)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=ready)
