"""The hot statements run on SQLite's driver connection read and write what Core does."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from supervisor.ledger.errors import LedgerUnavailable
from supervisor.ledger.service import ApprovalLedger
from supervisor.store import repository
from supervisor.store.convert import proposal_from_row
from supervisor.store.direct import DirectStatement
from supervisor.store.engine import create_ledger_engine
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
