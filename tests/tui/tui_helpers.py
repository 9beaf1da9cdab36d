"""Helpers shared by the UI tests: seeding a ledger and recording notifications."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from textual.pilot import Pilot

from screens.app import SupervisorApp
from supervisor.ledger.models import Proposal, TraceEvent
from supervisor.ledger.service import ApprovalLedger

SCHEMA_HASH = "5" * 64
FIXED_NOW = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
STATUSES = ("success", "success", "empty", "fallback", "error")


def propose(ledger: ApprovalLedger, tool: str = "create_customer", **overrides: Any) -> Proposal:
    """A pending proposal with sensible defaults."""
    arguments = overrides.pop("arguments", {"name": "Ada Lovelace", "tier": "gold"})
    options: dict[str, Any] = {
        "owner": "crm-agent",
        "thread_id": "t-1",
        "domains": ["crm"],
        "policy_reason": "creates a customer record",
        "ttl_seconds": 3600,
    }
    options.update(overrides)
    return ledger.propose(tool, SCHEMA_HASH, arguments, **options)


def record_notifications(app: SupervisorApp) -> list[str]:
    """Every notification text the app shows from now on."""
    notes: list[str] = []
    original = app.notify

    def recording(message: str, **kwargs: Any) -> None:
        notes.append(message)
        original(message, **kwargs)

    app.notify = recording  # type: ignore[method-assign]
    return notes


async def wait_for(pilot: Pilot[None], predicate: Callable[[], bool], limit: float = 5.0) -> None:
    """Let the app run until ``predicate`` holds (fails the test after ``limit`` seconds)."""
    deadline = asyncio.get_running_loop().time() + limit
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.02)


def generate_trace(count: int) -> list[TraceEvent]:
    """A deterministic mix of agents, tools and outcomes."""
    return [
        TraceEvent(
            at=FIXED_NOW + timedelta(seconds=index),
            agent_id=f"agent-{index % 3}",
            thread_id=f"t{index % 2}",
            run_id="run-1",
            kind="tool_result",
            tool=("inventory_lookup", "create_customer", "search_docs")[index % 3],
            outcome_status=STATUSES[index % len(STATUSES)],
            reason_code="ok" if index % 5 != 4 else "timeout",
            payload={"n": index},
        )
        for index in range(count)
    ]
