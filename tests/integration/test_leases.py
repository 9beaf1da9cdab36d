"""Leases in the ledger, on SQLite and PostgreSQL: one holder at a time, takeover after the
deadline, process leases renewed by heartbeats and released by a clean exit, and the query
"is the process waiting on this proposal alive?"."""

from __future__ import annotations

from datetime import timedelta

import pytest

from supervisor.ledger import ManualClock, ProcessRecord
from supervisor.ledger.errors import LeaseHeld
from supervisor.ledger.lease_time import (
    DEFAULT_LEASE_SECONDS,
    InvalidLeaseSeconds,
    lease_seconds_from_env,
)
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.processes import ProcessesService


def register(ledger: ApprovalLedger, clock: ManualClock, process_id: str) -> None:
    now = clock.now()
    ledger.upsert_process(
        ProcessRecord(process_id=process_id, kind="agent_run", pid=7, host="h",
                      status="waiting_for_approval", started_at=now, heartbeat_at=now)
    )  # fmt: skip


def propose(ledger: ApprovalLedger) -> str:
    return ledger.propose("send_email", "a" * 64, {"to": "a@b.c"}, owner="agent-1").proposal_id


def test_one_holder_at_a_time_and_an_expired_lease_is_taken_over(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    first = ledger.acquire_lease("turn:c1", "alice", seconds=10)
    assert first.holder == "alice" and first.taken_over_from is None
    with pytest.raises(LeaseHeld) as held:
        ledger.acquire_lease("turn:c1", "bob", seconds=10)
    assert held.value.code == "lease_held"
    assert held.value.holder == "alice" and held.value.until == first.expires_at
    clock.advance(9)
    assert ledger.renew_lease("turn:c1", "alice", seconds=10)  # renewed: deadline moves on
    clock.advance(9)
    with pytest.raises(LeaseHeld):
        ledger.acquire_lease("turn:c1", "bob", seconds=10)
    clock.advance(1.5)  # past the renewed deadline: alice is taken for dead
    taken = ledger.acquire_lease("turn:c1", "bob", seconds=10)
    assert taken.holder == "bob" and taken.taken_over_from == "alice"
    assert not ledger.renew_lease("turn:c1", "alice")  # the old holder cannot renew it back
    assert not ledger.release_lease("turn:c1", "alice")  # nor release bob's lease
    assert ledger.get_lease("turn:c1") is not None
    assert ledger.release_lease("turn:c1", "bob")
    assert ledger.get_lease("turn:c1") is None
    assert ledger.acquire_lease("turn:c1", "carol").holder == "carol"  # free again


def test_a_waiting_process_is_alive_until_its_lease_runs_out(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    proposal_id = propose(ledger)
    unwatched = propose(ledger)
    register(ledger, clock, "run-1")
    ledger.record_waiters("run-1", [proposal_id])
    assert ledger.waiter_alive(proposal_id) is True
    assert ledger.waiter_alive(unwatched) is None  # nobody recorded as waiting
    assert ledger.orphans([ledger.get(proposal_id), ledger.get(unwatched)]) == {}
    clock.advance(DEFAULT_LEASE_SECONDS - 1)
    ledger.heartbeat("run-1")  # renews the lease
    clock.advance(DEFAULT_LEASE_SECONDS - 1)
    assert ledger.waiter_alive(proposal_id) is True
    deadline = ledger.list_processes()[0].lease_expires_at
    assert deadline is not None
    clock.advance(2)  # the heartbeats stopped (SIGKILL): the lease runs out
    assert ledger.waiter_alive(proposal_id) is False  # even before anyone marks it lost
    orphans = ledger.orphans([ledger.get(proposal_id)])
    assert list(orphans) == [proposal_id] and orphans[proposal_id].gone_since == deadline
    [lost] = ledger.mark_lost_processes()
    assert lost.status == "lost" and lost.lost_at == deadline
    rows = {row.key: row for row in ProcessesService(ledger).refresh()}
    assert rows["process:run-1"].state.startswith("lost since ")
    assert rows["process:run-1"].lost_at == deadline
    ledger.approve(proposal_id, "operator@example.com")
    assert list(ledger.orphans([ledger.get(proposal_id)])) == [proposal_id]  # approved: still
    ledger.reject(unwatched, "operator@example.com", "no")
    ledger.heartbeat("run-1")  # a late heartbeat does not revive a lost process
    assert ledger.waiter_alive(proposal_id) is False


def test_a_clean_exit_releases_the_lease_at_once(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    proposal_id = propose(ledger)
    register(ledger, clock, "run-2")
    ledger.record_waiters("run-2", [proposal_id])
    assert ledger.list_processes()[0].lease_expires_at is not None
    ledger.heartbeat("run-2", status="exited", exit_code=1)  # no clock advance at all
    [process] = ledger.list_processes()
    assert process.lease_expires_at is None and process.status == "exited"
    assert ledger.waiter_alive(proposal_id) is False
    assert list(ledger.orphans([ledger.get(proposal_id)])) == [proposal_id]
    assert ledger.mark_lost_processes() == []  # exited, not lost
    ledger.reject(proposal_id, "operator@example.com", "done")
    assert ledger.orphans([ledger.get(proposal_id)]) == {}  # decided: nothing left to wait on


def test_the_lease_length_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUPERVISOR_LEASE_SECONDS", raising=False)
    assert lease_seconds_from_env() == DEFAULT_LEASE_SECONDS == 60
    monkeypatch.setenv("SUPERVISOR_LEASE_SECONDS", "2.5")
    assert lease_seconds_from_env() == 2.5
    for bad in ("0", "-1", "soon", "nan", "inf"):
        monkeypatch.setenv("SUPERVISOR_LEASE_SECONDS", bad)
        with pytest.raises(InvalidLeaseSeconds) as caught:
            lease_seconds_from_env()
        assert caught.value.code == "invalid_lease_seconds"


def test_a_process_lease_lasts_its_holders_lease_length(engine: object, clock: ManualClock) -> None:
    from sqlalchemy.engine import Engine

    assert isinstance(engine, Engine)
    short = ApprovalLedger(engine, clock, lease_seconds=5)
    try:
        register(short, clock, "run-3")
        [process] = short.list_processes()
        assert process.lease_expires_at == process.heartbeat_at + timedelta(seconds=5)
        clock.advance(5.5)
        assert [p.process_id for p in short.mark_lost_processes()] == ["run-3"]
    finally:
        short.close()


def test_a_process_declared_lost_records_since_when(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    register(ledger, clock, "run-4")
    clock.advance(3)
    ledger.heartbeat("run-4", status="lost")  # e.g. a kill found no such process
    [process] = ledger.list_processes()
    assert process.status == "lost" and process.lost_at == clock.now()
    assert process.lease_expires_at is None
