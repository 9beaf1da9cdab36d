"""Change feed across connections, retention, and the thin record services."""

from __future__ import annotations

import json
import stat
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from supervisor.ledger import BlobCorrupted, ManualClock, ProcessRecord, ProposalStatus, TraceEvent
from supervisor.ledger.models import ToolRecord
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.engine import create_ledger_engine

# change feed ------------------------------------------------------------------------------


def test_events_since_follows_the_cursor(ledger: ApprovalLedger) -> None:
    first = ledger.propose("t", "h", {"a": 1})
    cursor = ledger.head()
    second = ledger.propose("t", "h", {"a": 2})
    ledger.approve(second.proposal_id, "alice")
    events = ledger.events_since(cursor)
    assert [(e.action, e.subject) for e in events] == [
        ("propose", second.proposal_id),
        ("approve", second.proposal_id),
    ]
    assert ledger.events_since(events[-1].seq) == []
    assert ledger.events_since(0, limit=1)[0].subject == first.proposal_id


def test_wait_for_change_wakes_on_another_connections_commit(
    ledger_url: str, ledger: ApprovalLedger
) -> None:
    cursor = ledger.head()
    writer_engine = create_ledger_engine(ledger_url)
    writer = ApprovalLedger(writer_engine)
    committed_at: list[float] = []

    def write_later() -> None:
        time.sleep(0.3)
        writer.propose("t", "h", {"from": "other"})
        committed_at.append(time.monotonic())

    thread = threading.Thread(target=write_later)
    try:
        started = time.monotonic()
        thread.start()
        events = ledger.wait_for_change(cursor, timeout=10)
        woke = time.monotonic()
        thread.join()
    finally:
        writer_engine.dispose()
    assert [e.action for e in events] == ["propose"]
    assert woke - started < 5
    assert woke - committed_at[0] < 0.5  # woken by data_version / NOTIFY, not the 1 s fallback


def test_wait_for_change_returns_existing_events_at_once(ledger: ApprovalLedger) -> None:
    ledger.propose("t", "h", {"a": 1})
    started = time.monotonic()
    assert len(ledger.wait_for_change(0, timeout=5)) == 1
    assert time.monotonic() - started < 1


def test_wait_for_change_times_out_empty(ledger: ApprovalLedger) -> None:
    cursor = ledger.head()
    started = time.monotonic()
    assert ledger.wait_for_change(cursor, timeout=0.3) == []
    assert 0.25 <= time.monotonic() - started < 2


# retention --------------------------------------------------------------------------------


def test_purge_removes_old_terminal_proposals_only(
    ledger: ApprovalLedger, clock: ManualClock, tmp_path: Path
) -> None:
    def make(status: str) -> str:
        proposal = ledger.propose("t", "h", {"kind": status}, ttl_seconds=10 * 86400)
        pid = proposal.proposal_id
        if status == "pending":
            return pid
        if status == "rejected":
            ledger.reject(pid, "a")
            return pid
        ledger.approve(pid, "a")
        if status == "approved":
            return pid
        ledger.claim(pid, proposal.args_hash, "w")
        if status == "executed":
            ledger.complete(pid, "success", "blob:1")
        return pid

    old = {
        status: make(status)
        for status in ("pending", "approved", "executing", "rejected", "executed")
    }
    clock.advance(40 * 86400)
    fresh_rejected = make("rejected")
    archive = tmp_path / "archive" / "purged.jsonl"
    report = ledger.purge(older_than_days=30, archive_path=archive)
    assert sorted(report.proposal_ids) == sorted([old["rejected"], old["executed"]])
    remaining = {p.proposal_id for p in ledger.list(limit=100).items}
    assert remaining == {old["pending"], old["approved"], old["executing"], fresh_rejected}
    lines = [json.loads(line) for line in archive.read_text().splitlines()]
    assert {line["proposal"]["proposal_id"] for line in lines} == set(report.proposal_ids)
    executed_line = next(x for x in lines if x["proposal"]["status"] == "executed")
    assert executed_line["execution"]["result_ref"] == "blob:1"
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    assert ledger.verify().ok
    assert ledger.events_since(0)[-1].action == "purge"
    assert ledger.purge(older_than_days=30).purged == 0


def test_purge_never_touches_needs_reconciliation(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    proposal = ledger.propose("t", "h", {"a": 1})
    ledger.approve(proposal.proposal_id, "a")
    ledger.claim(proposal.proposal_id, proposal.args_hash, "w")
    ledger.recover(is_alive=lambda pid, host: False)
    clock.advance(400 * 86400)
    assert ledger.purge(older_than_days=1).purged == 0
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.NEEDS_RECONCILIATION


# records ----------------------------------------------------------------------------------


def test_checkpoints_round_trip(ledger: ApprovalLedger, clock: ManualClock) -> None:
    messages = [{"role": "user", "content": "créer un client"}]
    calls = [{"id": "c1", "name": "create_customer", "arguments": {"name": "Ada"}}]
    first = ledger.save_checkpoint(
        "agent", "t1", messages, calls, state={"run_id": "r1", "n": 2.0}, checkpoint_id="ck-1"
    )
    assert first.checkpoint_id == "ck-1" and first.state == {"run_id": "r1", "n": 2}
    clock.advance(1)
    second = ledger.save_checkpoint("agent", "t1", [*messages, {"role": "assistant"}])
    assert ledger.load_checkpoint(first.checkpoint_id) == first
    assert ledger.latest_checkpoint("agent", "t1") == second
    assert ledger.latest_checkpoint("agent", "other") is None
    assert ledger.load_checkpoint("nope") is None


def test_trace_events_append_and_query(ledger: ApprovalLedger, clock: ManualClock) -> None:
    now = clock.now()
    events = [
        TraceEvent(at=now, agent_id="a", thread_id="t", run_id="r1", kind="tool_call", tool="x"),
        TraceEvent(at=now, agent_id="a", thread_id="t", run_id="r1", kind="tool_result",
                   tool="x", outcome_status="empty", payload={"count": 0}),
        TraceEvent(at=now, agent_id="b", kind="run"),
    ]  # fmt: skip
    assert ledger.append_trace(events) == 3
    run = ledger.trace_events(run_id="r1")
    assert [e.kind for e in run] == ["tool_call", "tool_result"]
    assert run[1].payload == {"count": 0} and run[1].outcome_status == "empty"
    assert run[0].at == now
    after = ledger.trace_events(after_id=run[0].event_id or 0)
    assert [e.kind for e in after] == ["tool_result", "run"]
    assert [e.kind for e in ledger.trace_events(agent_id="b")] == ["run"]


def test_blobs_are_stored_once_and_checked(ledger: ApprovalLedger, engine: Engine) -> None:
    content = ("ligne\n" * 5000).encode()
    blob = ledger.put_blob(content, "text/plain")
    assert ledger.put_blob(content, "text/plain") == blob
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM blob")).scalar() == 1
    stored = ledger.get_blob(blob.sha256)
    assert stored is not None and stored.content == content and stored.size == len(content)
    assert blob.preview.startswith("ligne") and len(blob.preview) <= 500
    assert ledger.get_blob("0" * 64) is None
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE blob SET content = :c"), {"c": b"forged"})
    with pytest.raises(BlobCorrupted):
        ledger.get_blob(blob.sha256)


def test_tool_registry_agents_and_processes(ledger: ApprovalLedger, clock: ManualClock) -> None:
    tool = ToolRecord(
        handle="ops.create_customer", agent_id="ops", name="create_customer",
        import_ref="app.crm:create_customer", json_schema={"type": "object"},
        schema_hash="s1", domains=("crm",), flags={"side_effects": True},
    )  # fmt: skip
    ledger.upsert_tool(tool)
    ledger.upsert_tool(tool.model_copy(update={"schema_hash": "s2"}))
    assert ledger.get_tool(tool.handle) == tool.model_copy(update={"schema_hash": "s2"})
    assert [t.handle for t in ledger.list_tools("ops")] == [tool.handle]
    assert ledger.list_tools("other") == []

    ledger.save_agent("ops", "Operations", {"model": "gpt-4o-mini", "top_k": 4})
    loaded = ledger.load_agent("ops")
    assert loaded is not None and loaded.config == {"model": "gpt-4o-mini", "top_k": 4}
    assert ledger.load_agent("nobody") is None

    start = clock.now()
    ledger.upsert_process(
        ProcessRecord(process_id="p1", kind="browser_worker", pid=99, host="h",
                      command="worker --fresh", status="running", started_at=start,
                      heartbeat_at=start)
    )  # fmt: skip
    clock.advance(5)
    beat = ledger.heartbeat("p1", status="exited", exit_code=0)
    assert beat is not None
    assert (beat.status, beat.exit_code, beat.heartbeat_at) == ("exited", 0, clock.now())
    assert beat.heartbeat_at.tzinfo is not None and beat.started_at == datetime(
        2030, 1, 1, tzinfo=UTC
    )
    assert [p.process_id for p in ledger.list_processes("exited")] == ["p1"]
    assert ledger.heartbeat("missing") is None


def test_saving_an_agent_again_keeps_its_restart_factory(ledger: ApprovalLedger) -> None:
    """A process that builds and saves an agent again saves it without the factory first, and
    records the factory a moment later: in between, a resume of the agent's orphan from an
    earlier run must still find the factory (the demo's restart test caught that moment)."""
    ledger.save_agent("crm", "CRM", {"model": "m", "restart_factory": "app.agents:make_crm"})
    ledger.save_agent("crm", "CRM", {"model": "m2"})  # build_and_save() in a new process
    loaded = ledger.load_agent("crm")
    assert loaded is not None
    assert loaded.config == {"model": "m2", "restart_factory": "app.agents:make_crm"}
    ledger.save_agent("crm", "CRM", {"model": "m2", "restart_factory": "app.agents:make_crm2"})
    loaded = ledger.load_agent("crm")
    assert loaded is not None and loaded.config["restart_factory"] == "app.agents:make_crm2"
    ledger.save_agent("other", "Other", {"model": "m"})
    other = ledger.load_agent("other")
    assert other is not None and "restart_factory" not in other.config
