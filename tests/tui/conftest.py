"""Fixtures for the supervisor UI tests: a real SQLite ledger in tmp_path and a fixed identity."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from textual.pilot import Pilot

from supervisor.ledger.models import ApproverContext
from supervisor.provider import SQLModelProvider
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings

FIXED_NOW = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[SQLModelProvider]:
    """A fresh SQLite ledger file."""
    with SQLModelProvider(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        yield opened


@pytest.fixture
def identity() -> ApproverIdentity:
    """A stable approver identity (the instance id is fixed for snapshots)."""
    context = ApproverContext(os_user="tester", host="testhost", pid=1, via="tui")
    return ApproverIdentity("tester@testhost#test01", "test01", context)


@pytest.fixture
def settings() -> SupervisorSettings:
    """Fast polling, real clock."""
    return SupervisorSettings(poll_timeout=0.05, high_risk_domains=frozenset({"payments"}))


async def wait_for(pilot: Pilot[None], predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Let the app run until ``predicate`` holds (fails the test after ``timeout``)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.02)
