"""A live tail wakes on trace appends from another connection, on both engines.

On PostgreSQL the appending transaction notifies the trace channel (``LISTEN``/``NOTIFY``), so a
tail does not have to poll; an audited write that appends no trace does not wake it. On SQLite
the probe sees any commit (``PRAGMA data_version``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from supervisor.ledger.models import TraceEvent
from supervisor.store.provider import SQLModelProvider

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
