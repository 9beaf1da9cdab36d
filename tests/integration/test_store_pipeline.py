"""The hot statements on the driver connection (``sqlite3``, psycopg) and pipelined writes.

On PostgreSQL the writes of a step (a proposal's conditional UPDATE, the execution's INSERT or
UPDATE, the audit record) are sent in libpq's pipeline mode and read once at the end of
``LedgerTx.pipelined``; these tests pin down what that must not change, on both engines: the
rows and models equal what Core reads, a conditional UPDATE that misses stops the write with
nothing committed, a server error in the pipeline is translated and rolls back, a lost
connection is never reused, and driver errors never carry the statement's parameters.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, cast

import pytest
import sqlalchemy as sa

from supervisor.ledger.errors import ApprovalAlreadyDecided, LedgerUnavailable
from supervisor.ledger.models import ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.store import repository
from supervisor.store.convert import proposal_from_row
from supervisor.store.repository import LedgerTx, RowsNotMatched

SECRET = "tok-5f1c9e-never-in-an-error"


def _head(ledger: ApprovalLedger) -> int:
    return ledger.head()


def test_a_proposal_read_on_the_driver_equals_the_one_read_through_core(
    ledger: ApprovalLedger,
) -> None:
    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"}, domains=("crm", "billing"))
    ledger.approve(proposal.proposal_id, "op", "ok")
    with ledger.repository.read() as tx:
        direct = tx.proposal(proposal.proposal_id)  # the driver path on both engines
        core = tx._execute(repository._SELECT_PROPOSAL, {"w_id": proposal.proposal_id}).first()
    assert direct is not None
    assert direct == proposal_from_row(core)
    assert direct.decided_at is not None and direct.decided_at.utcoffset() is not None
    assert direct.domains == ("crm", "billing")


def test_each_step_returns_what_is_stored_and_the_chain_verifies(ledger: ApprovalLedger) -> None:
    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"}, domains=("crm",))
    assert proposal == ledger.get(proposal.proposal_id)
    approved = ledger.approve(proposal.proposal_id, "op", "ok", via="cli")
    assert approved == ledger.get(proposal.proposal_id)
    claimed = ledger.claim(proposal.proposal_id, proposal.args_hash, executor="runner")
    assert claimed == ledger.execution(proposal.proposal_id)
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.EXECUTING
    finished = ledger.complete(proposal.proposal_id, "degraded", "ref:1", executor="runner")
    assert finished == ledger.execution(proposal.proposal_id)
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.EXECUTED
    assert [record.action for record in ledger.audit_of(proposal.proposal_id)] == [
        "propose", "approve", "claim", "complete",
    ]  # fmt: skip
    assert ledger.verify().ok


def test_a_conditional_update_that_misses_in_a_pipelined_block_commits_nothing(
    ledger: ApprovalLedger,
) -> None:
    """The miss is known only when the pipeline's results are read (on PostgreSQL, after the
    audit record was sent): the block raises and the whole write rolls back."""
    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"})
    head = _head(ledger)
    now = ledger.clock.now()
    with pytest.raises(RowsNotMatched), ledger.repository.write() as tx, tx.pipelined():
        tx.update_proposal(
            proposal.proposal_id, expect_status=ProposalStatus.APPROVED,
            values={"status": ProposalStatus.EXECUTING, "updated_at": now},
        )  # fmt: skip
        tx.append_audit(at=now, actor="x", action="claim", subject=proposal.proposal_id,
                        payload={})  # fmt: skip
    assert _head(ledger) == head
    assert ledger.get(proposal.proposal_id) == proposal
    assert ledger.approve(proposal.proposal_id, "op", "ok").status is ProposalStatus.APPROVED
    assert ledger.verify().ok


@pytest.mark.parametrize("pause", [0.0, 0.3], ids=["at-the-end", "while-sending"])
def test_a_block_that_commits_and_misses_commits_nothing_and_the_write_can_still_read(
    ledger: ApprovalLedger, pause: float, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``commit=True`` the block's ``COMMIT`` is sent after its writes (PostgreSQL): a
    miss must make the server refuse the write, so that ``COMMIT`` commits nothing, and the
    step can still read the row to explain the miss. The server's refusal is seen when the
    block ends, or (after a pause) while the block still sends."""
    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"})
    head = _head(ledger)
    now = ledger.clock.now()
    seen: list[Any] = []
    with pytest.raises(LookupError, match="explained"), ledger.repository.write() as tx:
        try:
            with tx.pipelined(commit=True):
                tx.append_audit(at=now, actor="x", action="note", subject="s", payload={})
                tx.update_proposal(
                    proposal.proposal_id, expect_status=ProposalStatus.APPROVED,
                    values={"status": ProposalStatus.EXECUTING, "updated_at": now},
                )  # fmt: skip
                time.sleep(pause)
                for _ in range(3 if pause else 0):
                    tx.append_audit(at=now, actor="x", action="claim",
                                    subject=proposal.proposal_id, payload={})  # fmt: skip
        except RowsNotMatched:
            seen.append(tx.proposal(proposal.proposal_id))
            raise LookupError("the miss, explained") from None
    assert seen == [proposal]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert _head(ledger) == head
    assert ledger.get(proposal.proposal_id) == proposal
    assert ledger.approve(proposal.proposal_id, "op", "ok").status is ProposalStatus.APPROVED
    assert ledger.verify().ok


@pytest.mark.postgres
def test_a_block_that_commits_sends_the_commit_with_its_writes(postgres_url: str) -> None:
    """On PostgreSQL the write is committed when the block ends (another connection sees it
    before the write's context exits), and the transaction takes no statement after it."""
    from supervisor.store.engine import create_ledger_engine

    engine = create_ledger_engine(postgres_url)
    ledger = ApprovalLedger(engine)
    try:
        proposal = ledger.propose("create_customer", "v1", {"name": "Ada"})
        head = _head(ledger)
        now = ledger.clock.now()
        with ledger.repository.write() as tx:
            tx.proposal_for_write(proposal.proposal_id)
            with tx.pipelined(commit=True):
                tx.update_proposal(
                    proposal.proposal_id, expect_status=ProposalStatus.PENDING,
                    values={"status": ProposalStatus.CANCELLED, "updated_at": now},
                )  # fmt: skip
                tx.append_audit(at=now, actor="x", action="cancel",
                                subject=proposal.proposal_id, payload={})  # fmt: skip
            assert _head(ledger) == head + 1  # read on another pooled connection
            assert ledger.get(proposal.proposal_id).status is ProposalStatus.CANCELLED
            with pytest.raises(RuntimeError, match="committed with its last pipelined block"):
                tx.proposal(proposal.proposal_id)
        assert _head(ledger) == head + 1
        # A block that writes nothing leaves the commit to the write, as without the flag.
        with ledger.repository.write() as tx, tx.pipelined(commit=True):
            assert tx.proposal(proposal.proposal_id) is not None
    finally:
        ledger.close()
        engine.dispose()


def test_a_miss_found_by_a_step_is_its_state_error_and_audits_nothing(
    ledger: ApprovalLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the row changed although the write read it under the chain lock (written outside
    the supervisor), the step reports the row's real state, not a success."""
    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"})
    ledger.approve(proposal.proposal_id, "op", "ok")
    stale = ledger.get(proposal.proposal_id).model_copy(update={"status": ProposalStatus.PENDING})
    read = LedgerTx.proposal_for_write

    def stale_read(tx: LedgerTx, proposal_id: str, **options: Any) -> Any:
        found = read(tx, proposal_id, **options)
        assert found is not None
        return stale, found[1]

    monkeypatch.setattr(LedgerTx, "proposal_for_write", stale_read)
    head = _head(ledger)
    with pytest.raises(ApprovalAlreadyDecided):
        ledger.reject(proposal.proposal_id, "op", "no")
    assert _head(ledger) == head
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.APPROVED


def test_a_server_error_in_a_pipelined_block_rolls_back_and_hides_parameters(
    ledger: ApprovalLedger,
) -> None:
    kept = ledger.propose("create_customer", "v1", {"name": "Ada", "token": SECRET})
    head = _head(ledger)
    now = ledger.clock.now()
    with pytest.raises(sa.exc.IntegrityError) as raised, ledger.repository.write() as tx:
        with tx.pipelined():
            tx.append_audit(at=now, actor="x", action="note", subject="s", payload={})
            tx.insert_proposal(kept)  # the primary key is taken
    assert SECRET not in str(raised.value)
    assert "create_customer" not in str(raised.value)
    assert _head(ledger) == head
    made = ledger.propose("create_customer", "v1", {"name": "Bob"})  # the pool is usable
    assert ledger.get(made.proposal_id) == made
    assert ledger.verify().ok


@pytest.mark.parametrize("sent_next", ["statements", "commit"])
def test_an_error_seen_while_sending_is_raised_once_and_logs_nothing(
    ledger: ApprovalLedger, caplog: pytest.LogCaptureFixture, sent_next: str
) -> None:
    """The server's error can reach the client while the block is still sending (psycopg reads
    what has arrived as it sends): the block raises it, and leaving pipeline mode afterwards
    must not log it again (a CLI would print psycopg's warning on stderr). In a block that
    commits, what is being sent then is the ``COMMIT``. Nothing commits either way, and the
    pooled connection is back in normal mode for the next write."""
    kept = ledger.propose("create_customer", "v1", {"name": "Ada"})
    head = _head(ledger)
    now = ledger.clock.now()
    with (
        caplog.at_level(logging.DEBUG),
        pytest.raises(sa.exc.IntegrityError),
        ledger.repository.write() as tx,
    ):
        tx.proposal_for_write(kept.proposal_id)  # the chain tip, as a step reads it first
        with tx.pipelined(commit=sent_next == "commit"):
            tx.insert_proposal(kept)  # the primary key is taken
            time.sleep(0.3)  # the error is back before the next statement is sent
            for _ in range(3 if sent_next == "statements" else 0):
                tx.append_audit(at=now, actor="x", action="note", subject="s", payload={})
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert _head(ledger) == head
    with ledger.repository.read() as tx:  # the pooled connection left pipeline mode
        assert tx.proposal(kept.proposal_id) == kept
    for _ in range(8):  # every pooled connection is usable
        ledger.approve(ledger.propose("t", "v1", {"n": 1}).proposal_id, "op", "ok")
    assert ledger.verify().ok


def test_a_driver_error_outside_a_block_hides_parameters(ledger: ApprovalLedger) -> None:
    kept = ledger.propose("create_customer", "v1", {"name": "Ada", "token": SECRET})
    with pytest.raises(sa.exc.IntegrityError) as raised, ledger.repository.write() as tx:
        tx.insert_proposal(kept)
    assert SECRET not in str(raised.value)


def test_an_exception_in_a_pipelined_block_leaves_pipeline_mode_and_rolls_back(
    ledger: ApprovalLedger,
) -> None:
    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"})
    head = _head(ledger)
    now = ledger.clock.now()
    with pytest.raises(KeyError, match="own"), ledger.repository.write() as tx, tx.pipelined():
        tx.append_audit(at=now, actor="x", action="note", subject="s", payload={})
        raise KeyError("the block's own error")
    assert _head(ledger) == head
    for _ in range(8):  # every pooled connection is back in normal mode
        ledger.approve(ledger.propose("t", "v1", {"n": 1}).proposal_id, "op", "ok")
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
    assert ledger.verify().ok


def test_a_read_in_a_pipelined_block_sees_the_writes_sent_before_it(
    ledger: ApprovalLedger,
) -> None:
    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"})
    now = ledger.clock.now()
    with ledger.repository.write() as tx, tx.pipelined():
        tx.update_proposal(
            proposal.proposal_id, expect_status=ProposalStatus.PENDING,
            values={"status": ProposalStatus.CANCELLED, "updated_at": now},
        )  # fmt: skip
        seen = tx.proposal(proposal.proposal_id)
        tx.append_audit(at=now, actor="x", action="cancel", subject=proposal.proposal_id,
                        payload={})  # fmt: skip
    assert seen is not None and seen.status is ProposalStatus.CANCELLED


def test_a_trail_read_with_the_proposal_is_read_again_once_the_write_appends(
    ledger: ApprovalLedger,
) -> None:
    """A claim reads the proposal's audit records with its first read; once the same write
    appends a record about it, ``audit_of`` must include that record."""
    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"})
    now = ledger.clock.now()
    with ledger.repository.write() as tx:
        tx.proposal_for_write(proposal.proposal_id, trail=True)
        before = [record.action for record in tx.audit_of(proposal.proposal_id)]
        tx.append_audit(at=now, actor="x", action="note", subject=proposal.proposal_id,
                        payload={})  # fmt: skip
        after = [record.action for record in tx.audit_of(proposal.proposal_id)]
    assert before == ["propose"]
    assert after == ["propose", "note"]


@pytest.mark.postgres
def test_a_connection_lost_in_a_pipeline_is_unavailable_and_never_reused(
    postgres_url: str,
) -> None:
    """The server ends the session while a pipelined write is in flight (as a restart would):
    the write fails as unavailable, nothing is committed, and the pool never hands out the
    dead connection again."""
    from supervisor.store.engine import create_ledger_engine

    engine = create_ledger_engine(postgres_url)
    ledger = ApprovalLedger(engine)
    try:
        proposal = ledger.propose("create_customer", "v1", {"name": "Ada"})
        head = _head(ledger)
        now = ledger.clock.now()
        killer = sa.create_engine(engine.url, poolclass=sa.NullPool)
        dead: list[Any] = []
        with pytest.raises(LedgerUnavailable), ledger.repository.write() as tx, tx.pipelined():
            tx.update_proposal(
                proposal.proposal_id, expect_status=ProposalStatus.PENDING,
                values={"status": ProposalStatus.CANCELLED, "updated_at": now},
            )  # fmt: skip
            driver = tx._driver_connection()
            dead.append(driver)
            pid = driver.info.backend_pid
            ended = threading.Event()

            def terminate() -> None:
                with killer.connect() as connection:
                    connection.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
                ended.set()

            threading.Thread(target=terminate).start()
            assert ended.wait(10)
            tx.append_audit(at=now, actor="x", action="cancel", subject=proposal.proposal_id,
                            payload={})  # fmt: skip
        killer.dispose()
        assert dead[0].closed
        assert _head(ledger) == head
        for _ in range(cast(Any, engine.pool).size() + 2):
            with ledger.repository.write() as tx:
                assert tx._driver_connection() is not dead[0]
        assert ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
    finally:
        ledger.close()
        engine.dispose()


@pytest.mark.postgres
def test_a_write_sent_with_the_chain_lock_reads_what_the_holder_committed(
    postgres_url: str,
) -> None:
    """The lock and a write's first read go in one round trip. The read must still run after
    the lock is granted, with its own snapshot: a write that waited for the holder continues
    the chain from the holder's record instead of forking it."""
    from supervisor.store.engine import create_ledger_engine

    engine = create_ledger_engine(postgres_url)
    ledger = ApprovalLedger(engine)
    try:
        ledger.propose("create_customer", "v1", {"name": "Ada"})
        now = ledger.clock.now()
        made: list[Any] = []
        started = threading.Event()

        def propose() -> None:
            started.set()
            made.append(ledger.propose("create_customer", "v1", {"name": "Bob"}))

        with ledger.repository.write() as tx:
            tx.audit_head()  # the lock is taken with this first statement
            holder = tx.append_audit(at=now, actor="x", action="note", subject="s", payload={})
            assert holder is not None  # chained here: this write took the lock first
            waiter = threading.Thread(target=propose)
            waiter.start()
            assert started.wait(10)
            waiter.join(0.5)
            assert waiter.is_alive()  # it waits for the lock while the holder is open
        waiter.join(30)
        assert not waiter.is_alive()
        assert [record.seq for record in ledger.audit_of(made[0].proposal_id)] == [holder.seq + 1]
        assert ledger.verify().ok
    finally:
        ledger.close()
        engine.dispose()
