"""Row <-> model conversions of the store: every writer is read back to the same model."""

from __future__ import annotations

from datetime import UTC, datetime

from supervisor.ledger.models import (
    AgentRecord,
    Blob,
    CacheEntry,
    Checkpoint,
    ProcessRecord,
    ToolRecord,
    TraceEvent,
)
from supervisor.store import convert
from supervisor.store.tables import AgentRow, BlobRow, ProcessRow, ToolRegistryRow, TraceEventRow

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_checkpoint_round_trips() -> None:
    checkpoint = Checkpoint(
        checkpoint_id="c1", agent_id="a", thread_id="t", messages=[{"role": "user"}],
        pending_tool_calls=[{"id": "call"}], state={"turn": 2}, schema_version=1,
        created_at=NOW,
    )  # fmt: skip
    assert convert.checkpoint_from_row(convert.checkpoint_to_row(checkpoint)) == checkpoint


def test_trace_event_round_trips_with_the_database_id() -> None:
    event = TraceEvent(
        at=NOW, agent_id="a", thread_id="t", run_id="r", kind="tool_result", tool="lookup",
        outcome_status="success", reason_code=None, payload={"n": 1}, blob_ref="sha256:" + "0" * 64,
    )  # fmt: skip
    row = TraceEventRow(id=7, **convert.trace_to_values(event))
    assert convert.trace_from_row(row) == event.model_copy(update={"event_id": 7})


def test_blob_round_trips_with_its_content() -> None:
    blob = Blob(sha256="ab" * 32, size=2, media_type="text/plain", preview="hi", content=b"hi")
    assert convert.blob_from_row(BlobRow(**convert.blob_to_values(blob, NOW))) == blob


def test_registry_records_round_trip() -> None:
    tool = ToolRecord(
        handle="h", agent_id="a", name="lookup", import_ref="pkg:lookup", description="d",
        json_schema={"type": "object"}, schema_hash="f" * 64, domains=("crm",), flags={"x": 1},
    )  # fmt: skip
    agent = AgentRecord(agent_id="a", name="Agent", config={"model": "m"}, updated_at=NOW)
    process = ProcessRecord(
        process_id="p", kind="agent_run", pid=12, host="h", command="run", status="running",
        started_at=NOW, heartbeat_at=NOW, exit_code=None,
    )  # fmt: skip
    tool_row = ToolRegistryRow(**convert.tool_to_values(tool, NOW))
    assert convert.tool_from_row(tool_row) == tool
    assert convert.agent_from_row(AgentRow(**convert.agent_to_values(agent))) == agent
    assert convert.process_from_row(ProcessRow(**convert.process_to_values(process))) == process


def test_cache_entry_round_trips_with_and_without_an_embedding() -> None:
    entry = CacheEntry(
        key="k", agent_id="a", context_hash="c", query_norm="q", answer="42",
        embedding=[0.5, 1.0], hits=3, created_at=NOW, last_hit_at=NOW,
    )  # fmt: skip
    plain = entry.model_copy(update={"embedding": None, "last_hit_at": None})
    assert convert.cache_entry_from_row(convert.cache_entry_to_row(entry)) == entry
    assert convert.cache_entry_from_row(convert.cache_entry_to_row(plain)) == plain
