"""The history replay reads, on both engines: every proposal, times as aware UTC datetimes."""

from __future__ import annotations

from datetime import UTC, timedelta

from supervisor.rules.history import read_history
from supervisor.store.provider import SQLModelProvider


def test_history_times_are_the_ledgers_own_in_utc(ledger_url: str) -> None:
    with SQLModelProvider(ledger_url) as provider:
        ledger = provider.ledger
        first = ledger.propose("t", "h", {"n": 1})
        decided = ledger.reject(ledger.propose("t", "h", {"n": 2}).proposal_id, "ops", "no")
        calls = read_history(ledger.repository)
        later = read_history(ledger.repository, since=decided.created_at)
    assert [call.proposal_id for call in calls] == [first.proposal_id, decided.proposal_id]
    assert calls[0].created_at == first.created_at and calls[0].decided_at is None
    assert calls[1].decided_at == decided.decided_at
    assert all(call.created_at.tzinfo is UTC for call in calls)
    assert calls[1].decided_at is not None and calls[1].decided_at.utcoffset() == timedelta(0)
    assert [call.proposal_id for call in later] == [decided.proposal_id]
