"""Process rows whose heartbeat stopped become ``lost``, on SQLite and PostgreSQL."""

from __future__ import annotations

from supervisor.ledger import ManualClock, ProcessRecord
from supervisor.ledger.models import LOST_AFTER_SECONDS, PROCESS_HEARTBEAT_SECONDS
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.processes import ProcessesService, lost_state


def add(ledger: ApprovalLedger, clock: ManualClock, process_id: str, status: str) -> None:
    now = clock.now()
    ledger.upsert_process(
        ProcessRecord(process_id=process_id, kind="agent_run", pid=1, host="h", status=status,
                      started_at=now, heartbeat_at=now)
    )  # fmt: skip


def statuses(ledger: ApprovalLedger) -> dict[str, str]:
    return {record.process_id: record.status for record in ledger.list_processes()}


def test_the_deadline_is_twelve_heartbeats() -> None:
    assert LOST_AFTER_SECONDS == 12 * PROCESS_HEARTBEAT_SECONDS == 60


def test_only_live_rows_past_the_deadline_become_lost(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    for process_id, status in [("run", "running"), ("wait", "waiting_for_approval"),
                               ("done", "exited"), ("gone", "killed")]:  # fmt: skip
        add(ledger, clock, process_id, status)
    clock.advance(LOST_AFTER_SECONDS)
    add(ledger, clock, "fresh", "running")
    assert ledger.mark_lost_processes() == []  # exactly at the deadline: not yet
    clock.advance(0.001)
    lost = ledger.mark_lost_processes()
    assert sorted(record.process_id for record in lost) == ["run", "wait"]
    assert all(record.status == "lost" for record in lost)
    assert statuses(ledger) == {"run": "lost", "wait": "lost", "done": "exited",
                                "gone": "killed", "fresh": "running"}  # fmt: skip
    assert ledger.mark_lost_processes() == []  # marked once


def test_a_heartbeat_keeps_a_row_live_and_a_late_one_does_not_revive_it(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    add(ledger, clock, "beating", "running")
    add(ledger, clock, "late", "running")
    for _ in range(30):
        clock.advance(PROCESS_HEARTBEAT_SECONDS)
        ledger.heartbeat("beating")
    ledger.mark_lost_processes()
    assert statuses(ledger) == {"beating": "running", "late": "lost"}
    ledger.heartbeat("late")  # a late beat refreshes the time, not the status
    assert statuses(ledger)["late"] == "lost"
    ledger.heartbeat("late", status="exited", exit_code=0)  # a final status still lands
    assert statuses(ledger)["late"] == "exited"


def test_a_process_listing_marks_stale_rows(ledger: ApprovalLedger, clock: ManualClock) -> None:
    add(ledger, clock, "stale", "running")
    clock.advance(LOST_AFTER_SECONDS + 1)
    rows = ProcessesService(ledger).refresh()
    [lost] = ledger.list_processes()
    assert lost.lost_at is not None  # the lease deadline that passed: shown as since-when
    assert [(row.key, row.state) for row in rows] == [("process:stale", lost_state(lost.lost_at))]
    assert rows[0].state.startswith("lost since ")
    assert statuses(ledger) == {"stale": "lost"}


def test_an_agent_whose_run_ended_is_not_shown_running() -> None:
    from datetime import UTC, datetime

    from supervisor.ledger.models import TraceEvent
    from supervisor.services.processes import agent_rows

    at = datetime.now(UTC)
    trace = [
        TraceEvent(at=at, agent_id="done", kind="run", outcome_status="started"),
        TraceEvent(at=at, agent_id="done", kind="run", outcome_status="completed"),
        TraceEvent(at=at, agent_id="busy", kind="run", outcome_status="started"),
        TraceEvent(at=at, agent_id="busy", kind="model_call"),
        TraceEvent(at=at, agent_id="failed", kind="run", outcome_status="failed"),
    ]
    states = {row.name: row.state for row in agent_rows([], [], trace)}
    assert states == {"done": "idle", "busy": "running", "failed": "idle"}
