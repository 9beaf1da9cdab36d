"""PostgreSQL: the ledger's hot statements run on libpq (``supervisor.store.direct_pg``).

Each statement is prepared once per connection, by this module and not by psycopg (whose
cache would ``DEALLOCATE ALL`` at a rollback after an error, these statements with its own).
What these tests pin down: statements stay prepared across steps, refusals and server errors;
a session that lost them (``DEALLOCATE ALL``) prepares them again without failing a step; a
step interrupted while it waits for the chain lock (Ctrl-C) is cancelled on the server and
leaves its connection usable and the ledger consistent.
"""

from __future__ import annotations

import gc
import select
import threading
import weakref
from collections.abc import Iterator
from typing import Any, cast

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from support.orphans import until
from support.postgres import advisory_lock_waiters

from supervisor.ledger.errors import ApprovalAlreadyDecided
from supervisor.ledger.models import ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.direct_pg import RoundTrip
from supervisor.store.repository import AUDIT_LOCK_KEY

pytestmark = pytest.mark.postgres


@pytest.fixture
def ledger_url(postgres_url: str) -> str:
    """PostgreSQL only: conftest's ``engine`` and ``ledger`` fixtures build on this."""
    return postgres_url


def _cycle(ledger: ApprovalLedger, n: int) -> str:
    proposal = ledger.propose("create_customer", "v1", {"name": f"Ada {n}"})
    ledger.approve(proposal.proposal_id, "alice@example.com")
    ledger.claim(proposal.proposal_id, proposal.args_hash, executor="w")
    ledger.complete(proposal.proposal_id, "success", executor="w")
    return proposal.proposal_id


def _prepared(engine: Engine) -> dict[str, str]:
    """The statements prepared on the pool's connection, name -> text (the steps run on it
    too: one thread, one connection checked out at a time); no text is prepared twice."""
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(
            "SELECT name, statement FROM pg_prepared_statements"
        ).all()
    prepared = {str(row[0]): str(row[1]) for row in rows}
    assert len(set(prepared.values())) == len(prepared), "a statement was prepared twice"
    return prepared


@pytest.fixture
def one_connection(engine: Engine) -> Iterator[None]:
    """Every step below runs on the pool's first connection."""
    assert cast(Any, engine.pool).checkedout() == 0
    yield


def test_each_statement_is_prepared_once_per_connection_and_stays(
    ledger: ApprovalLedger, engine: Engine, one_connection: None
) -> None:
    for n in range(2):  # the second cycle reads the policy version the first stored
        done = _cycle(ledger, n)
    first = _prepared(engine)
    assert first and all(name.startswith("_sv_") for name in first)  # psycopg prepares none
    with engine.connect() as connection:  # each planned once (see engine._generic_plans)
        assert connection.exec_driver_sql("SHOW plan_cache_mode").scalar() == "force_generic_plan"
    for n in range(2, 6):
        done = _cycle(ledger, n)
    assert _prepared(engine) == first  # the same statements, prepared once, none again
    for _ in range(3):  # refused steps, and a rollback after a server error, keep them
        with pytest.raises(ApprovalAlreadyDecided):
            ledger.approve(done, "bob@example.com")
    with pytest.raises(Exception, match="division by zero"), engine.begin() as connection:
        connection.exec_driver_sql("SELECT 1 / 0")
    kept = _prepared(engine)
    assert kept.items() >= first.items()  # a refusal may use statements of its own
    _cycle(ledger, 7)
    assert _prepared(engine) == kept


def test_a_session_that_lost_its_statements_prepares_them_again(
    ledger: ApprovalLedger, engine: Engine, one_connection: None
) -> None:
    _cycle(ledger, 0)
    with engine.connect() as connection:
        connection.exec_driver_sql("DEALLOCATE ALL")
        connection.commit()
    assert _prepared(engine) == {}
    made = _cycle(ledger, 1)  # no step fails: each first round trip runs again, prepared anew
    assert ledger.get(made).status is ProposalStatus.EXECUTED
    assert _prepared(engine)
    assert ledger.verify().ok


def test_a_step_interrupted_while_it_waits_for_the_lock_gives_up_its_place(
    ledger: ApprovalLedger, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while a step waits for the chain lock (another session holds it): the step's
    statement is cancelled on the server, the rest of its round trip is read and dropped, the
    step writes nothing, and its connection goes back to the pool usable."""
    proposal = ledger.propose("refund", "h", {"amount": 5})
    interrupt = threading.Event()
    real_wait = RoundTrip._wait

    def wait(trip: RoundTrip, *, read: bool, write: bool = False) -> bool:
        if not read or write:
            return real_wait(trip, read=read, write=write)
        while not select.select([trip._pgconn.socket], [], [], 0.02)[0]:
            if interrupt.is_set():
                interrupt.clear()  # once, as one Ctrl-C
                raise KeyboardInterrupt
        return True

    monkeypatch.setattr(RoundTrip, "_wait", wait)
    holder = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    try:
        holder.execute(sa.text("SELECT pg_advisory_lock(:key)"), {"key": AUDIT_LOCK_KEY})
        outcome: dict[str, BaseException] = {}

        def approve() -> None:
            try:
                ledger.approve(proposal.proposal_id, "alice@example.com")
            except BaseException as error:  # reported to the test
                outcome["error"] = error

        thread = threading.Thread(target=approve, daemon=True)
        thread.start()
        until(lambda: advisory_lock_waiters(engine) == 1, "the approval to wait", timeout=30)
        interrupt.set()
        thread.join(60)  # a hang, not a speed: without the cancel it waits for the holder
        assert not thread.is_alive(), "the interrupted step went on waiting for the lock"
        assert isinstance(outcome.get("error"), KeyboardInterrupt)
        assert advisory_lock_waiters(engine) == 0  # its statement was cancelled
        assert ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
    finally:
        holder.execute(sa.text("SELECT pg_advisory_unlock(:key)"), {"key": AUDIT_LOCK_KEY})
        holder.close()
    monkeypatch.undo()
    approved = ledger.approve(proposal.proposal_id, "alice@example.com")
    assert approved.status is ProposalStatus.APPROVED
    for n in range(4):  # every pooled connection works
        _cycle(ledger, n)
    assert ledger.verify().ok


def test_a_closed_connection_is_not_kept_alive_by_what_was_prepared_on_it(
    ledger: ApprovalLedger, engine: Engine
) -> None:
    """A long-lived process makes and drops connections (pool overflow, a restarted server):
    what the ledger keeps per connection must go with it."""
    _cycle(ledger, 0)
    fairy = engine.raw_connection()
    driver = weakref.ref(fairy.driver_connection)
    fairy.close()
    assert driver() is not None and _prepared(engine)  # the steps' connection, statements on it
    engine.dispose()  # closes the pool's connections
    gc.collect()
    assert driver() is None


def test_a_lost_race_says_so_on_the_server_and_nothing_else_is_taken_for_one(
    engine: Engine,
) -> None:
    """A guard or a one-row write that no longer holds fails with a text that says a race was
    lost (what the server logs), a condition that holds or is NULL passes (as ``1 / NULL``
    did), and another bad integer is not taken for a lost race (it would be retried)."""
    import psycopg

    from supervisor.store.direct_pg import LOST_RACE, is_lost_race, lost_race_unless

    with engine.connect() as connection:
        driver = cast(Any, connection.connection.driver_connection)
        for holds in ("true", "NULL::boolean", "(SELECT count(*) FROM pg_class) >= 0"):
            assert driver.execute(f"SELECT {lost_race_unless(holds)}").fetchone() == (1,)
        driver.rollback()
        for broken in ("false", "(SELECT count(*) FROM pg_class) < 0"):
            with pytest.raises(psycopg.errors.InvalidTextRepresentation) as lost:
                driver.execute(f"SELECT {lost_race_unless(broken)}")
            driver.rollback()
            assert is_lost_race(lost.value) and LOST_RACE in str(lost.value)
        with pytest.raises(psycopg.errors.InvalidTextRepresentation) as other:
            driver.execute("SELECT 'supervisor'::int")
        driver.rollback()
        assert not is_lost_race(other.value)
