"""The hot statements run on SQLite's driver connection read and write what Core does."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
import sqlalchemy as sa

from supervisor.ledger.errors import LedgerBusy, LedgerUnavailable
from supervisor.ledger.service import ApprovalLedger
from supervisor.store import repository
from supervisor.store.convert import proposal_from_row
from supervisor.store.direct import DirectStatement
from supervisor.store.engine import create_ledger_engine, sqlite_path
from supervisor.store.errors import translate_errors


@pytest.fixture
def ledger(sqlite_url: str) -> Any:
    engine = create_ledger_engine(sqlite_url)
    yield ApprovalLedger(engine)
    engine.dispose()


def test_a_proposal_read_directly_equals_the_one_read_through_core(ledger: Any) -> None:
    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"}, domains=("crm", "billing"))
    ledger.approve(proposal.proposal_id, "op", "ok")
    with ledger.repository.read() as tx:
        direct = tx.proposal(proposal.proposal_id)  # the driver path on SQLite
        core = tx._execute(repository._SELECT_PROPOSAL, {"w_id": proposal.proposal_id}).first()
    assert direct is not None
    assert direct == proposal_from_row(core)
    assert direct.decided_at is not None and direct.decided_at.tzinfo is not None
    assert direct.domains == ("crm", "billing")


def test_the_direct_cycle_leaves_a_chain_that_verifies_and_a_joined_execution(ledger: Any) -> None:
    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"}, domains=("crm",))
    ledger.approve(proposal.proposal_id, "op", "ok")
    claimed = ledger.claim(proposal.proposal_id, proposal.args_hash, executor="runner")
    blob = ledger.blob_of(b'{"id": 1}', "application/json")
    finished = ledger.complete(proposal.proposal_id, "success", "sha256:" + blob.sha256,
                               executor="runner", blob=blob)  # fmt: skip
    assert claimed.started_at.tzinfo is not None
    assert finished.state == "executed" and finished.finished_at is not None
    assert ledger.get_blob(blob.sha256).content == b'{"id": 1}'
    with ledger.repository.write() as tx:
        _, execution = tx.proposal_for_write(proposal.proposal_id)
    assert execution == ledger.execution(proposal.proposal_id)
    assert ledger.verify().ok


def test_a_driver_error_is_wrapped_as_core_wraps_it(ledger: Any) -> None:
    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"})
    with pytest.raises(sa.exc.IntegrityError), ledger.repository.write() as tx:
        tx.insert_proposal(proposal)  # the primary key is taken
    statement = DirectStatement(sa.text("SELECT * FROM no_such_table"))
    with pytest.raises(LedgerUnavailable), translate_errors(), ledger.repository.read() as tx:
        statement.execute(tx.connection.connection.driver_connection, None)


def test_a_statement_needing_per_execution_work_is_left_to_core() -> None:
    table = repository._PROPOSAL
    expanding = sa.select(table.c.id).where(table.c.id.in_(sa.bindparam("ids", expanding=True)))
    with pytest.raises(ValueError, match="through Core"):
        DirectStatement(expanding)


def _proposal_ids(ledger: Any) -> set[str]:
    return {proposal.proposal_id for proposal in ledger.list(limit=1000).items}


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_a_write_begun_on_the_driver_rolls_back_on_any_exception(
    ledger: Any, error: BaseException
) -> None:
    kept = ledger.propose("create_customer", "v1", {"name": "Ada"})
    lost = kept.model_copy(update={"proposal_id": "lost"})
    with pytest.raises(type(error)), ledger.repository.write() as tx:
        tx.insert_proposal(lost)  # on the driver connection
        tx.append_audit(at=kept.created_at, actor="t", action="note", subject="lost", payload={})
        assert "lost" in {p.proposal_id for p in tx.list_proposals()}  # Core sees it: same tx
        raise error
    assert _proposal_ids(ledger) == {kept.proposal_id}
    assert ledger.verify().ok and ledger.verify().checked == 1
    # The pooled connection came back out of the transaction: the next write commits.
    assert ledger.approve(kept.proposal_id, "op", "ok").status == "approved"
    assert ledger.verify().checked == 2


def test_core_and_orm_statements_join_the_driver_transaction(ledger: Any) -> None:
    first = ledger.propose("create_customer", "v1", {"name": "Ada"})
    second = first.model_copy(update={"proposal_id": "second"})
    with pytest.raises(RuntimeError), ledger.repository.write() as tx:
        tx.insert_proposal(second)
        assert tx.audit_tip() == 1  # an ORM session statement, on the same connection
        tx.connection.execute(sa.delete(repository._PROPOSAL).where(
            repository._PROPOSAL.c.id == first.proposal_id))  # fmt: skip
        raise RuntimeError("undo both")
    assert _proposal_ids(ledger) == {first.proposal_id}
    with ledger.repository.write() as tx:
        tx.insert_proposal(second)
        assert tx.audit_tip() == 1
        tx.connection.execute(sa.delete(repository._PROPOSAL).where(
            repository._PROPOSAL.c.id == first.proposal_id))  # fmt: skip
    assert _proposal_ids(ledger) == {"second"}


def test_a_commit_refused_by_sqlite_rolls_back_and_is_translated(ledger: Any) -> None:
    kept = ledger.propose("create_customer", "v1", {"name": "Ada"})
    with pytest.raises(sa.exc.IntegrityError), ledger.repository.write() as tx:
        tx._driver.execute("PRAGMA defer_foreign_keys = ON")  # checked at COMMIT instead
        tx._driver.execute("INSERT INTO proposal_domain (proposal_id, domain) VALUES ('x', 'd')")
    with ledger.repository.read() as tx:
        domains = tx.connection.execute(sa.text("SELECT proposal_id FROM proposal_domain")).all()
    assert domains == []
    assert ledger.approve(kept.proposal_id, "op", "ok").status == "approved"


def test_a_held_write_lock_is_busy_and_leaves_the_pool_usable(sqlite_url: str) -> None:
    engine = create_ledger_engine(sqlite_url, busy_timeout_s=0.1)
    try:
        ledger = ApprovalLedger(engine)
        kept = ledger.propose("create_customer", "v1", {"name": "Ada"})
        path = sqlite_path(sa.make_url(sqlite_url))
        assert path is not None
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(LedgerBusy):
            ledger.approve(kept.proposal_id, "op", "ok")
        with pytest.raises(LedgerBusy), ledger.repository.write():
            pass
        holder.rollback()
        holder.close()
        assert ledger.approve(kept.proposal_id, "op", "ok").status == "approved"
    finally:
        engine.dispose()


def test_decisions_returned_without_a_read_back_equal_the_stored_rows(ledger: Any) -> None:
    proposal = ledger.propose("create_customer", "v1", {"name": "Ada"}, domains=("crm",))
    approved = ledger.approve(proposal.proposal_id, "op", "ok", via="cli")
    assert approved == ledger.get(proposal.proposal_id)
    assert approved.approver_context is not None and approved.approver_context.via == "cli"
    ledger.claim(proposal.proposal_id, proposal.args_hash, executor="runner")
    finished = ledger.complete(proposal.proposal_id, "degraded", "ref:1", executor="runner")
    assert finished == ledger.execution(proposal.proposal_id)
    assert finished.state == "executed" and finished.outcome_status == "degraded"
    rejected = ledger.propose("create_customer", "v1", {"name": "Bob"})
    assert ledger.reject(rejected.proposal_id, "op", "no") == ledger.get(rejected.proposal_id)


def test_a_connection_that_cannot_roll_back_is_discarded_and_the_first_error_raised(
    ledger: Any,
) -> None:
    """The driver connection dies inside a write (closed under it, as a crashed handle would
    be): its rollback fails, so the connection is thrown away, never handed out again, and the
    caller sees the error that ended the write, not the rollback's."""
    kept = ledger.propose("create_customer", "v1", {"name": "Ada"})
    lost = kept.model_copy(update={"proposal_id": "lost"})
    pool = ledger.repository.engine.pool
    with pytest.raises(KeyError, match="the write's own error"), ledger.repository.write() as tx:
        tx.insert_proposal(lost)
        dead = tx._driver
        dead.close()  # its open transaction ends with it: nothing of it was committed
        raise KeyError("the write's own error")
    with pytest.raises(sqlite3.ProgrammingError):
        dead.execute("SELECT 1")  # really closed; the pool must not hand it out again
    for _ in range(pool.size() + 2):  # every pooled connection is handed out in turn
        with ledger.repository.write() as tx:
            assert tx._driver is not dead
            tx._driver.execute("SELECT 1")
    assert _proposal_ids(ledger) == {kept.proposal_id}
    assert ledger.approve(kept.proposal_id, "op", "ok").status == "approved"
    assert ledger.verify().ok
