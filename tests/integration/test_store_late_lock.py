"""PostgreSQL: approve, reject, cancel, claim and complete take the audit chain's lock late.

Their first read runs before the lock. The lock is taken with the write pipeline, followed by a
guard: the newest audit record of the proposal (and of the policy, when the step used it) must
still be the one read. The server chains the step's audit record under the lock. A guard that
misses aborts the write, and the ledger runs the step again with the lock taken first
(``LedgerBase._late_or_early``). So the lock is held while the server runs the writes, not
across the client's round trips.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from support.orphans import until
from support.postgres import advisory_lock_waiters, statements_sent

from supervisor.canonical import args_hash as compute_args_hash
from supervisor.ledger.errors import ApproverNotAllowed, LedgerError
from supervisor.ledger.models import ProposalStatus, TraceEvent
from supervisor.ledger.policy import ApprovalPolicy
from supervisor.ledger.service import ApprovalLedger
from supervisor.store import repository
from supervisor.store.notify import ALL_CHANNELS, notice_channel, notice_payload
from supervisor.store.repository import AUDIT_LOCK_KEY, LedgerTx, RowsNotMatched

pytestmark = pytest.mark.postgres

GUARD_PREFIX = "SELECT (CASE WHEN ("
"""How a guard statement (``transaction._guard_statement``) starts, as the server sees it."""


@pytest.fixture
def ledger_url(postgres_url: str) -> str:
    """PostgreSQL only: conftest's ``engine`` and ``ledger`` fixtures build on this."""
    return postgres_url


class ChainLock:
    """The chain lock held by another session: a session-level advisory lock on the same key,
    which conflicts with the ledger's transaction-level one."""

    def __init__(self, engine: Engine) -> None:
        self._connection = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        self._held = False

    def hold(self) -> None:
        self._connection.execute(sa.text("SELECT pg_advisory_lock(:key)"), {"key": AUDIT_LOCK_KEY})
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._connection.execute(
                sa.text("SELECT pg_advisory_unlock(:key)"), {"key": AUDIT_LOCK_KEY}
            )

    def close(self) -> None:
        self.release()
        self._connection.close()


@pytest.fixture
def chain_lock(engine: Engine) -> Iterator[ChainLock]:
    lock = ChainLock(engine)
    try:
        yield lock
    finally:
        lock.close()


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # reported to the test
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_a_late_write_reads_while_another_holds_the_lock_and_writes_after_it(
    ledger: ApprovalLedger, engine: Engine, chain_lock: ChainLock
) -> None:
    proposal = ledger.propose("refund", "h", {"amount": 5})
    chain_lock.hold()
    read = threading.Event()

    def approve_by_hand() -> None:
        with ledger.repository.write(late_lock=True) as tx:
            found = tx.proposal_for_write(proposal.proposal_id)
            assert found is not None and found[0].status is ProposalStatus.PENDING
            read.set()
            with tx.pipelined(commit=True):
                tx.update_proposal(
                    proposal.proposal_id, expect_status=ProposalStatus.PENDING,
                    values={"status": ProposalStatus.APPROVED, "approver_id": "ops",
                            "decided_at": found[0].created_at},
                )  # fmt: skip
                tx.append_audit(
                    at=found[0].created_at, actor="ops", action="approve",
                    subject=proposal.proposal_id, payload={"by": "hand"},
                )  # fmt: skip

    thread, outcome = _in_thread(approve_by_hand)
    # The read does not wait for the lock (a write taking the lock first would block here).
    assert read.wait(10), "the late write's first read waited for the chain lock"
    until(lambda: advisory_lock_waiters(engine) == 1, "the write waits for the lock", timeout=10)
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
    chain_lock.release()
    thread.join(10)
    assert not thread.is_alive() and "error" not in outcome, outcome
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.APPROVED
    report = ledger.verify()  # the hand-made approval is not a full one: only the chain counts
    assert report.chain_ok and report.checked == 2, report


def test_a_late_write_whose_proposal_gained_a_record_meanwhile_commits_nothing(
    ledger: ApprovalLedger,
) -> None:
    proposal = ledger.propose("refund", "h", {"amount": 5})
    with pytest.raises(RowsNotMatched):
        with ledger.repository.write(late_lock=True) as tx:
            found = tx.proposal_for_write(proposal.proposal_id)
            assert found is not None
            # Another process extends it: audited, and still pending, so only the guard sees it.
            ledger.extend(proposal.proposal_id, 60, "ops")
            with tx.pipelined(commit=True):
                tx.update_proposal(
                    proposal.proposal_id, expect_status=ProposalStatus.PENDING,
                    values={"status": ProposalStatus.APPROVED},
                )  # fmt: skip
                tx.append_audit(
                    at=found[0].created_at, actor="ops", action="approve",
                    subject=proposal.proposal_id, payload={},
                )  # fmt: skip
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
    actions = [record.action for record in ledger.audit_of(proposal.proposal_id)]
    assert actions == ["propose", "extend"]
    assert ledger.verify().ok


def test_an_approval_read_before_a_policy_change_is_checked_against_the_new_policy(
    ledger: ApprovalLedger, engine: Engine, clock: Any, chain_lock: ChainLock
) -> None:
    paying = ledger.propose("transfer", "h", {"amount": 2}, user="bob", domains=["finance"])
    applier = ApprovalLedger(engine, clock)
    chain_lock.hold()
    try:
        # The policy change queues for the lock first, then the approval reads (no policy
        # yet: anyone may approve) and queues behind it.
        strict = ApprovalPolicy(approvers_by_domain={"finance": ["cfo@example.com"]})
        applying, applied = _in_thread(lambda: applier.apply_policy(strict, reason="r"))
        until(lambda: advisory_lock_waiters(engine) == 1, "the policy change waits", timeout=10)
        approving, approved = _in_thread(lambda: ledger.approve(paying.proposal_id, "cfo"))
        until(lambda: advisory_lock_waiters(engine) == 2, "the approval waits", timeout=10)
        chain_lock.release()
        applying.join(10)
        approving.join(10)
    finally:
        applier.close()
    assert "error" not in applied, applied
    assert isinstance(approved.get("error"), ApproverNotAllowed), approved
    assert ledger.get(paying.proposal_id).status is ProposalStatus.PENDING
    assert ledger.verify().ok


def test_records_the_server_chains_verify_and_name_themselves_in_their_notices(
    ledger: ApprovalLedger, ledger_url: str
) -> None:
    hostile = 'ops "q" \\ \n\t — ünï 🚀 \u2028 \'); DROP TABLE audit; --'
    arguments = {"note": hostile, "amount": 1}
    proposal = ledger.propose("refund", "h", arguments)
    other = ledger.propose("refund", "h", {"amount": 2})
    listener = psycopg.connect(ledger_url.replace("postgresql+psycopg", "postgresql"),
                               autocommit=True)  # fmt: skip
    try:
        for channel in sorted(ALL_CHANNELS):
            listener.execute(f"LISTEN {channel}")
        ledger.approve(proposal.proposal_id, hostile[:60], reason=hostile)
        ledger.reject(other.proposal_id, "ops", reason=hostile)
        ledger.claim(proposal.proposal_id, compute_args_hash("refund", "h", arguments, None),
                     executor=hostile[:60])  # fmt: skip
        ledger.complete(proposal.proposal_id, result_ref=hostile, executor=hostile[:60])
        heard = [(notice.channel, notice.payload)
                 for notice in listener.notifies(timeout=1, stop_after=4)]  # fmt: skip
    finally:
        listener.close()
    report = ledger.verify()
    assert report.ok, report
    records = [
        record
        for record in ledger.audit_of(proposal.proposal_id) + ledger.audit_of(other.proposal_id)
        if record.action != "propose"
    ]
    assert sorted(record.action for record in records) == [
        "approve", "claim", "complete", "reject"
    ]  # fmt: skip
    assert sorted(heard) == sorted(
        (notice_channel(record.action), notice_payload(record.seq, record.action, record.subject))
        for record in records
    )


def test_a_call_read_before_a_grant_was_made_commits_nothing(
    ledger: ApprovalLedger, clock: Any
) -> None:
    def write(path: str) -> Any:
        return ledger.propose("write_file", "s" * 64, {"path": path, "size": 1}, owner="d")

    first = write("/srv/docs/a.md")
    with pytest.raises(RowsNotMatched):
        with ledger.repository.write(late_lock=True) as tx:
            tx.probe_grants("write_file", clock.now())
            tx.policy_in_force()  # and no live grant: a call would be asked
            ledger.approve_similar(
                first.proposal_id, "operator", patterns={"path": {"prefix": "/srv/docs"}}
            )  # another process grants calls like it
            with tx.pipelined(commit=True):
                tx.append_audit(
                    at=clock.now(), actor="d", action="propose", subject="p", payload={}
                )
    assert [record.subject for record in ledger.audit_of("p")] == []
    assert write("/srv/docs/b.md").status is ProposalStatus.APPROVED  # the grant decides it
    assert ledger.verify().ok


def test_a_call_whose_read_went_stale_reports_its_trace_once(
    ledger: ApprovalLedger, engine: Engine, clock: Any, chain_lock: ChainLock
) -> None:
    calls: list[str] = []

    def report(proposal: Any) -> list[TraceEvent]:  # like the runtime's: it drains a buffer
        calls.append(proposal.proposal_id)
        payload = {"proposal_id": proposal.proposal_id}
        return [TraceEvent(agent_id="a", thread_id="t", run_id="r", kind="approval",
                           at=clock.now(), payload=payload)]  # fmt: skip

    applier = ApprovalLedger(engine, clock)
    chain_lock.hold()
    try:
        # A policy change queues for the lock first; the call reads the policy before it and
        # queues behind it, so its first attempt misses and it runs again.
        applying, applied = _in_thread(
            lambda: applier.apply_policy(ApprovalPolicy(forbid_self_approval=True), reason="r")
        )
        until(lambda: advisory_lock_waiters(engine) == 1, "the policy change waits", timeout=10)
        calling, called = _in_thread(
            lambda: ledger.propose("refund", "h", {"amount": 1}, thread_id="t", trace=report)
        )
        until(lambda: advisory_lock_waiters(engine) == 2, "the call waits", timeout=10)
        chain_lock.release()
        applying.join(10)
        calling.join(10)
    finally:
        applier.close()
    assert "error" not in applied and "error" not in called, (applied, called)
    proposal = called["value"]
    assert calls == [proposal.proposal_id]  # the first attempt missed before calling it
    stored = ledger.trace_events(agent_id="a", thread_id="t")
    assert [event.payload["proposal_id"] for event in stored] == [proposal.proposal_id]
    assert ledger.verify().ok


def test_no_step_waits_a_round_trip_for_its_begin(
    ledger: ApprovalLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg begins a transaction with its first statement: sent alone, the ``BEGIN`` is a
    round trip of its own. Each step's first read goes in one pipeline with it."""
    from psycopg._connection_base import BaseConnection

    alone: list[bytes] = []
    send = BaseConnection._exec_command

    def spy(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        if self._pipeline is None:
            alone.append(bytes(command) if isinstance(command, bytes) else str(command).encode())
        return send(self, command, *args, **kwargs)

    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"})
    ledger.approve(proposal.proposal_id, "alice@example.com")
    monkeypatch.setattr(BaseConnection, "_exec_command", spy)
    other = ledger.propose("create_customer", "v1", {"name": "Grace"})
    ledger.approve(other.proposal_id, "alice@example.com")
    ledger.claim(other.proposal_id, other.args_hash, executor="w")
    ledger.complete(other.proposal_id, "success", executor="w")
    ledger.cancel(ledger.propose("create_customer", "v1", {"name": "Alan"}).proposal_id, "bob")
    assert [command for command in alone if command.startswith(b"BEGIN")] == []
    assert ledger.get(other.proposal_id).status is ProposalStatus.EXECUTED


def test_a_late_propose_checks_what_it_read_in_one_guard(
    ledger: ApprovalLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A propose read the policy and "no live grant" before the lock: both are checked after
    it by one statement (each statement costs the server while every writer waits)."""
    ledger.propose("create_customer", "v1", {"name": "Ada"})
    sent = statements_sent(monkeypatch)
    ledger.propose("create_customer", "v1", {"name": "Grace"})
    guards = [query for query in sent if query.startswith(GUARD_PREFIX)]
    assert len(guards) == 1, guards
    assert "FROM audit WHERE subject" in guards[0] and "FROM policy_grant" in guards[0]


def test_the_claiming_ledger_completes_in_one_round_trip_without_a_read(
    ledger: ApprovalLedger, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A complete by the ledger that claimed the proposal sends the lock and its writes with
    the ``COMMIT``, reading nothing first; another ledger's complete reads the proposal and
    its execution before the lock and guards what it read."""
    other = ApprovalLedger(engine)
    try:
        for finisher, reads in ((ledger, 0), (other, 1)):
            proposal = ledger.propose("create_customer", "v1", {"name": "Ada"})
            ledger.approve(proposal.proposal_id, "alice@example.com")
            ledger.claim(proposal.proposal_id, proposal.args_hash, executor="w")
            sent = statements_sent(monkeypatch)
            finisher.complete(proposal.proposal_id, "success", executor="w")
            monkeypatch.undo()
            assert len([q for q in sent if q.startswith("SELECT proposal.")]) == reads, sent
            assert len([q for q in sent if q.startswith(GUARD_PREFIX)]) == reads, sent
            assert [q for q in sent if "pg_advisory_xact_lock" in q] == [
                "SELECT pg_advisory_xact_lock(%s)"
            ]
            assert ledger.get(proposal.proposal_id).status is ProposalStatus.EXECUTED
        assert ledger.verify().ok
    finally:
        other.close()


def test_a_refused_step_leaves_the_connection_its_prepared_statements(
    ledger: ApprovalLedger, engine: Engine
) -> None:
    """A step that loses a race rolls back; psycopg's own rollback would forget every
    statement the connection prepared, so on a busy ledger they were parsed and planned
    again nearly every time. Prepared statements are not transactional: they stay."""
    from supervisor.ledger.errors import ApprovalAlreadyDecided

    def prepared() -> int:
        with engine.connect() as connection:  # the pool's one connection, the steps' too
            return int(
                connection.exec_driver_sql(
                    "SELECT count(*) FROM pg_prepared_statements"
                ).scalar_one()
            )

    for n in range(12):  # psycopg prepares a statement at its second run (its default: fifth)
        done = ledger.propose("create_customer", "v1", {"name": f"Ada {n}"})
        ledger.approve(done.proposal_id, "alice@example.com")
        ledger.claim(done.proposal_id, done.args_hash, executor="w")
        ledger.complete(done.proposal_id, "success", executor="w")
    before = prepared()
    assert before >= 5
    for _ in range(3):
        with pytest.raises(ApprovalAlreadyDecided):
            ledger.approve(done.proposal_id, "bob@example.com")
    assert prepared() >= before
    again = ledger.propose("create_customer", "v1", {"name": "Grace"})
    ledger.approve(again.proposal_id, "alice@example.com")
    assert ledger.get(again.proposal_id).status is ProposalStatus.APPROVED


class WriteLog:
    """Each write transaction the ledger opens in this thread: True when its lock is late."""

    def __init__(self, ledger: ApprovalLedger, monkeypatch: pytest.MonkeyPatch) -> None:
        self.by_thread: dict[int, list[bool]] = {}
        real = ledger.repository.write

        def write(*args: Any, late_lock: bool = False, **kwargs: Any) -> Any:
            self.by_thread.setdefault(threading.get_ident(), []).append(late_lock)
            return real(*args, late_lock=late_lock, **kwargs)

        monkeypatch.setattr(ledger.repository, "write", write)


def test_a_claim_that_lost_its_race_is_refused_without_taking_the_lock_first(
    ledger: ApprovalLedger, engine: Engine, chain_lock: ChainLock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both executors read "approved" before either holds the lock; the loser's late write
    misses its guard. Its second late read sees the winner's claim and refuses there, so the
    loser never queues for the lock again just to find out it lost."""
    proposal = ledger.propose("refund", "h", {"amount": 5})
    ledger.approve(proposal.proposal_id, "ops")
    log = WriteLog(ledger, monkeypatch)
    chain_lock.hold()
    threads = []
    for waiting, executor in enumerate(("one", "two"), start=1):

        def claim(executor: str = executor) -> Any:
            return ledger.claim(proposal.proposal_id, proposal.args_hash, executor=executor)

        threads.append(_in_thread(claim))

        def queued(n: int = waiting) -> bool:
            return advisory_lock_waiters(engine) == n

        until(queued, f"claim {waiting} waits", timeout=10)
    chain_lock.release()
    for thread, _ in threads:
        thread.join(10)
    outcomes = [outcome for _, outcome in threads]
    won = [outcome for outcome in outcomes if "value" in outcome]
    lost = [outcome for outcome in outcomes if "error" in outcome]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert lost[0]["error"].code == "approval_already_decided"
    attempts = sorted(log.by_thread.values(), key=len)
    assert attempts == [[True], [True, True]], attempts  # never the lock first
    assert [r.action for r in ledger.audit_of(proposal.proposal_id)] == [
        "propose", "approve", "claim",
    ]  # fmt: skip
    assert ledger.verify().ok


def test_a_step_that_keeps_missing_late_takes_the_lock_first(ledger: ApprovalLedger) -> None:
    attempts: list[bool] = []

    def step(late: bool) -> str:
        attempts.append(late)
        if late:
            raise RowsNotMatched("the guard missed")
        return "done"

    assert ledger._late_or_early(step) == "done"
    assert attempts == [True, True, False]


def test_approve_many_reads_its_proposals_before_the_lock_and_reruns_late_after_a_race(
    ledger: ApprovalLedger,
    engine: Engine,
    clock: Any,
    chain_lock: ChainLock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch reads and checks every proposal before the chain lock, and sends the lock,
    the guards, the writes and the COMMIT together. Another approver wins one of them while
    the batch waits: the guard misses, and the batch's second late read finds that one
    decided, reports it, and approves the rest, still without taking the lock first."""
    first, contested, last = (ledger.propose("refund", "h", {"amount": n}) for n in (1, 2, 3))
    other = ApprovalLedger(engine, clock)
    log = WriteLog(ledger, monkeypatch)
    chain_lock.hold()
    try:
        rival, rival_outcome = _in_thread(lambda: other.approve(contested.proposal_id, "rival"))
        until(lambda: advisory_lock_waiters(engine) == 1, "the rival approval waits", timeout=10)
        ids = [first.proposal_id, contested.proposal_id, last.proposal_id]
        batch, batch_outcome = _in_thread(lambda: ledger.approve_many(ids, "ops", "ok"))
        until(lambda: advisory_lock_waiters(engine) == 2, "the batch waits behind it", timeout=10)
        chain_lock.release()
        rival.join(10)
        batch.join(10)
    finally:
        other.close()
    assert "error" not in rival_outcome and "error" not in batch_outcome, batch_outcome
    outcomes = batch_outcome["value"]
    assert outcomes[0].status is ProposalStatus.APPROVED and outcomes[0].approver_id == "ops"
    assert outcomes[1].code == "approval_already_decided"  # the rival's
    assert outcomes[2].status is ProposalStatus.APPROVED
    assert ledger.get(contested.proposal_id).approver_id == "rival"
    assert list(log.by_thread.values()) == [[True, True]]  # late twice, never the lock first
    assert ledger.verify().ok


def test_approve_many_names_a_proposal_twice_and_decides_it_once(ledger: ApprovalLedger) -> None:
    proposal = ledger.propose("refund", "h", {"amount": 1})
    once, twice = ledger.approve_many([proposal.proposal_id, proposal.proposal_id], "ops")
    assert not isinstance(once, Exception) and once.status is ProposalStatus.APPROVED
    assert isinstance(twice, Exception) and twice.code == "approval_already_decided"
    assert [r.action for r in ledger.audit_of(proposal.proposal_id)] == ["propose", "approve"]
    assert ledger.verify().ok


def test_approve_many_reads_its_proposals_in_one_round_trip(
    ledger: ApprovalLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [ledger.propose("refund", "h", {"amount": n}).proposal_id for n in range(4)]
    before_lock: list[Any] = []
    together: list[list[Any]] = []
    real_one, real_many = LedgerTx._hot_before_lock, LedgerTx._hot_together

    def one(tx: LedgerTx, statement: Any, params: Any = None) -> Any:
        before_lock.append(statement)
        return real_one(tx, statement, params)

    def many(tx: LedgerTx, reads: Any, *, before_lock: bool = False) -> Any:
        together.append([statement for statement, _ in reads])
        return real_many(tx, reads, before_lock=before_lock)

    monkeypatch.setattr(LedgerTx, "_hot_before_lock", one)
    monkeypatch.setattr(LedgerTx, "_hot_together", many)
    outcomes = ledger.approve_many([*ids, "0" * 32], "ops")
    assert [getattr(o, "status", None) for o in outcomes[:4]] == [ProposalStatus.APPROVED] * 4
    assert isinstance(outcomes[4], LedgerError) and outcomes[4].code == "proposal_not_found"
    assert repository._SELECT_FOR_LATE_WRITE not in before_lock  # none read on its own
    assert together == [[repository._SELECT_FOR_LATE_WRITE] * 5]  # all five in one round trip
    assert ledger.verify().ok
