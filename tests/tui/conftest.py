"""Fixtures for the supervisor UI tests: a fixed identity and fast settings (the SQLite ledger
is the `provider` of tests/conftest.py)."""

from __future__ import annotations

import pytest

from supervisor.ledger.models import ApproverContext
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings


@pytest.fixture
def identity() -> ApproverIdentity:
    """A stable approver identity (the instance id is fixed for snapshots)."""
    context = ApproverContext(os_user="tester", host="testhost", pid=1, via="tui")
    return ApproverIdentity("tester@testhost#test01", "test01", context)


@pytest.fixture
def settings() -> SupervisorSettings:
    """Fast polling, real clock, no settle delay (test_main_screen tests the delay itself)."""
    return SupervisorSettings(
        poll_timeout=0.05, high_risk_domains=frozenset({"payments"}), decision_settle_seconds=0.0
    )
