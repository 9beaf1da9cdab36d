"""PostgreSQL pool checkouts: a pooled connection the server ended is replaced before the ledger
uses it, and a healthy one costs no ping.

The ledger's engine pings a pooled connection only when its socket has something to read (the
server's goodbye, the end of the stream): ``supervisor.store.engine._ping_if_stirred``.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from support.postgres import PostgresCluster

from supervisor.ledger.models import ProposalStatus
from supervisor.ledger.service import ApprovalLedger

pytestmark = pytest.mark.postgres


@pytest.fixture
def ledger_url(postgres_url: str) -> str:
    """PostgreSQL only: conftest's ``engine`` and ``ledger`` fixtures build on this."""
    return postgres_url


@pytest.fixture
def pings(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every ping the pool's checkout sends, with its outcome (a real ping, counted)."""
    seen: list[bool] = []
    dialect: Any = engine.dialect
    ping = dialect._do_ping_w_event

    def counted(dbapi_connection: Any) -> bool:
        alive: bool = ping(dbapi_connection)
        seen.append(alive)
        return alive

    monkeypatch.setattr(dialect, "_do_ping_w_event", counted)
    return seen


def _pool_of_two(ledger: ApprovalLedger) -> list[int]:
    """Check out two connections at once, so the pool keeps two; their server pids."""
    pids: list[int] = []
    both = threading.Barrier(2)

    def hold() -> None:
        with ledger.repository.engine.connect() as connection:
            driver: Any = connection.connection.driver_connection
            pids.append(driver.info.backend_pid)
            both.wait(10)

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(set(pids)) == 2
    return pids


def test_a_healthy_pooled_connection_is_not_pinged(
    ledger: ApprovalLedger, pings: list[bool]
) -> None:
    for index in range(10):
        made = ledger.propose("refund", "0" * 64, {"i": index})
        approved = ledger.approve(made.proposal_id, "alice", "ok")
        ledger.claim(made.proposal_id, approved.args_hash, "worker")
        ledger.complete(made.proposal_id, "success")
        assert ledger.get(made.proposal_id).status is ProposalStatus.EXECUTED
    assert pings == []


def test_pooled_connections_the_server_ended_are_replaced_before_use(
    ledger: ApprovalLedger, pings: list[bool], pg_cluster: PostgresCluster, postgres_url: str
) -> None:
    made = ledger.propose("refund", "0" * 64, {"i": 1})
    pids = _pool_of_two(ledger)
    admin = sa.create_engine(pg_cluster.url())
    try:
        with admin.connect() as connection:
            for pid in pids:  # what a restart, an idle timeout or an operator's kill does
                ended = connection.execute(sa.text("SELECT pg_terminate_backend(:p, 5000)"),
                                           {"p": pid}).scalar()  # fmt: skip
                assert ended is True
    finally:
        admin.dispose()
    # Every call goes through, on new connections: nothing the caller sees.
    assert ledger.get(made.proposal_id).status is ProposalStatus.PENDING
    approved = ledger.approve(made.proposal_id, "alice", "ok")
    ledger.claim(made.proposal_id, approved.args_hash, "worker")
    ledger.complete(made.proposal_id, "success")
    assert ledger.get(made.proposal_id).status is ProposalStatus.EXECUTED
    assert pings[0] is False  # the first checkout found its connection ended, pinged, and
    assert len(pings) == 1  # recycled the whole pool, so the other one was never pinged
    with ledger.repository.engine.connect() as connection:
        driver: Any = connection.connection.driver_connection
        now = driver.info.backend_pid
    assert now not in pids
