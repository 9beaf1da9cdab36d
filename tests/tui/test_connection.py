"""Headless tests of the ledger connection state and of the inbox cursor across a failed read
(no event loop, a real SQLite ledger; the failure is the ledger's own typed error)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from tui_helpers import propose

from supervisor.ledger.errors import LedgerUnavailable
from supervisor.services.approvals import ApprovalsService
from supervisor.services.connection import ConnectionStatus, LedgerConnection
from supervisor.services.identity import ApproverIdentity
from supervisor.store.provider import SQLModelProvider


def test_the_ledger_is_down_while_any_service_fails_and_back_when_all_read() -> None:
    connection = LedgerConnection()
    seen: list[ConnectionStatus] = []
    connection.subscribe(seen.append)
    connection.ok("traces")  # nothing was failing: nothing to say
    assert seen == [] and connection.status().connected
    connection.failed("traces", LedgerUnavailable("server closed the connection"))
    connection.failed("approvals", LedgerUnavailable("server closed the connection"))
    connection.ok("traces")
    assert not connection.status().connected  # approvals still fails
    assert connection.status().sources == ("approvals",)
    connection.ok("approvals")
    assert connection.status().connected
    assert [status.connected for status in seen] == [False, False, False, True]
    assert seen[0].message == "server closed the connection"
    assert seen[-1].outage_seconds is not None and seen[-1].outage_seconds >= 0


def test_follow_retries_transient_errors_and_raises_others() -> None:
    connection = LedgerConnection()
    stop = threading.Event()
    calls: list[int] = []

    def read() -> float:
        calls.append(1)
        if len(calls) < 3:
            raise LedgerUnavailable("down")
        stop.set()
        return 0.0

    connection.follow("traces", read, stop)
    assert len(calls) == 3 and connection.status().connected

    def broken() -> float:
        raise RuntimeError("a bug, not an outage")

    with pytest.raises(RuntimeError):
        connection.follow("traces", broken, threading.Event())


def test_a_feed_read_that_fails_half_way_is_read_again_from_the_same_cursor(
    provider: SQLModelProvider, identity: ApproverIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = ApprovalsService(provider.ledger, identity)
    service.load()
    proposal = propose(provider.ledger)
    real_get_many = provider.ledger.get_many
    failures = [LedgerUnavailable("server closed the connection")]

    def get_once_failing(proposal_ids: Any, *args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return real_get_many(proposal_ids, *args, **kwargs)

    monkeypatch.setattr(provider.ledger, "get_many", get_once_failing)
    with pytest.raises(LedgerUnavailable):
        service.poll(0.5)
    assert not failures  # the failing read happened
    assert service.pending() == []
    service.poll(0.5)
    assert [p.proposal_id for p in service.pending()] == [proposal.proposal_id]
    assert [r.action for r in service.history(proposal.proposal_id)] == ["propose"]
