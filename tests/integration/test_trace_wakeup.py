"""A live tail wakes on trace appends from another connection, on both engines.

On PostgreSQL the appending transaction notifies the trace channel (``LISTEN``/``NOTIFY``), so a
tail does not have to poll; an audited write that appends no trace does not wake it. On SQLite
the probe sees any commit (``PRAGMA data_version``).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import TraceEvent
from supervisor.store.provider import SQLModelProvider
from supervisor.store.runs import COPY_FROM

WAIT_S = 5.0


def event(n: int) -> TraceEvent:
    return TraceEvent(
        at=datetime.now(UTC), agent_id="agent-a", thread_id="t", run_id="r",
        kind="tool_result", tool="inventory_lookup", outcome_status="success", payload={"n": n},
    )  # fmt: skip


def test_a_trace_append_in_another_process_wakes_the_tail_probe(ledger_url: str) -> None:
    with SQLModelProvider(ledger_url) as writer, SQLModelProvider(ledger_url) as reader:
        probe = reader.ledger.trace_probe()
        try:
            assert probe.wait(0.05) is False  # nothing appended yet
            writer.ledger.append_trace([event(1), event(2)])
            assert probe.wait(WAIT_S) is True
            assert [e.payload["n"] for e in reader.ledger.trace_events()] == [1, 2]
            assert probe.wait(0.05) is False  # one append, one wake-up
        finally:
            probe.close()


def test_on_postgresql_only_trace_appends_notify_the_trace_channel(postgres_url: str) -> None:
    with SQLModelProvider(postgres_url) as writer, SQLModelProvider(postgres_url) as reader:
        probe = reader.ledger.trace_probe()
        try:
            writer.ledger.propose("create_customer", "schema-v1", {"name": "Ada"}, owner="a")
            assert probe.wait(0.5) is False  # an audited write without trace events
            writer.ledger.append_trace([event(1)])
            assert probe.wait(WAIT_S) is True
        finally:
            probe.close()


@pytest.mark.postgres
def test_a_large_batch_on_postgresql_is_stored_exactly_and_a_bad_one_leaves_nothing(
    postgres_url: str,
) -> None:
    """Batches of COPY_FROM events or more take PostgreSQL's COPY path: the same rows come back
    as the single-row path stores them, and a value the column refuses is the same typed
    error, with nothing of the batch written."""
    batch = [
        event(n).model_copy(update={"payload": {"n": n, "text": "tab\there\nnewline \\ é"}})
        for n in range(COPY_FROM * 3)
    ]
    with SQLModelProvider(postgres_url) as provider:
        provider.ledger.append_trace(batch[:1])  # executemany path
        provider.ledger.append_trace(batch)  # COPY path
        stored = provider.ledger.trace_events(limit=1000)
        assert [e.payload for e in stored[1:]] == [e.payload for e in batch]
        assert [e.at for e in stored[1:]] == [e.at for e in batch]
        assert stored[0].model_dump(exclude={"event_id"}) == stored[1].model_dump(
            exclude={"event_id"}
        )
        too_long = [*batch, event(0).model_copy(update={"tool": "t" * 300})]
        with pytest.raises(LedgerError) as raised:
            provider.ledger.append_trace(too_long)
        assert raised.value.code == "ledger_value_rejected"
        assert len(provider.ledger.trace_events(limit=1000)) == len(batch) + 1
