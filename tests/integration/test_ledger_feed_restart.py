"""The change feed across a real PostgreSQL restart: typed errors, then it carries on.

Each test runs its own throwaway server (so stopping it disturbs no other test) and stops it
with ``pg_ctl -m fast``, which terminates every client connection as a restart does.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.ledgers import open_ledger
from support.postgres import PostgresCluster

from supervisor.ledger import LedgerUnavailable
from supervisor.ledger.service import ApprovalLedger

WAIT_S = 60.0
"""Upper bound on waiting for something that should happen (not a timing assertion)."""


@pytest.fixture
def server(pg_cluster: PostgresCluster) -> Iterator[PostgresCluster]:
    if pg_cluster.external:
        pytest.skip("the tests cannot restart an external PostgreSQL server")
    cluster = PostgresCluster()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def url(server: PostgresCluster) -> str:
    return server.create_database("feed_restart")


@pytest.fixture
def follower(url: str) -> Iterator[ApprovalLedger]:
    yield from open_ledger(url)


@pytest.fixture
def writer(url: str, follower: ApprovalLedger) -> Iterator[ApprovalLedger]:
    yield from open_ledger(url)


def test_the_listen_probe_raises_a_typed_error_and_reconnects(
    server: PostgresCluster, writer: ApprovalLedger, follower: ApprovalLedger
) -> None:
    probe = follower.repository.change_probe()
    try:
        server.stop_server()
        with pytest.raises(LedgerUnavailable) as lost:
            probe.wait(WAIT_S)  # the server closes the listening connection
        assert lost.value.code == "ledger_unavailable"
        with pytest.raises(LedgerUnavailable):
            probe.wait(0.1)  # reconnecting while the server is down
        server.start_server()
        assert probe.wait(0.1) is True  # reconnected: notifications may have been lost
        writer.propose("t", "h", {"after": "restart"})
        assert probe.wait(WAIT_S) is True
    finally:
        probe.close()


def test_a_feed_follower_rides_out_a_server_restart(
    server: PostgresCluster, writer: ApprovalLedger, follower: ApprovalLedger
) -> None:
    seen: list[str] = []
    errors: list[BaseException] = []
    rounds = [0]
    changed = threading.Condition()
    stop = threading.Event()

    def follow() -> None:
        cursor = 0
        while not stop.is_set():
            try:
                records = follower.wait_for_change(cursor, 0.5)
            except BaseException as error:  # what would kill a TUI's feed thread
                errors.append(error)
                records = []
            with changed:
                rounds[0] += 1
                if records:
                    cursor = records[-1].seq
                    seen.extend(record.subject for record in records)
                changed.notify_all()

    def until(predicate: Any) -> None:
        with changed:
            assert changed.wait_for(predicate, timeout=WAIT_S)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        before = writer.propose("t", "h", {"before": "restart"}).proposal_id
        until(lambda: before in seen)
        server.stop_server()
        with changed:
            down_at = rounds[0]
        until(lambda: rounds[0] >= down_at + 3)  # several feed rounds against a dead server
        server.start_server()
        after = writer.propose("t", "h", {"after": "restart"}).proposal_id
        until(lambda: after in seen)
    finally:
        stop.set()
        thread.join(timeout=WAIT_S)
    assert errors == []
    assert seen == [before, after]


def test_a_listening_connection_closed_right_after_its_listen_is_a_typed_error(
    url: str, follower: ApprovalLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server may close a new listening connection between its ``LISTEN`` and the probe's
    first read (a restart at that moment): that is the same transient ``LedgerUnavailable``,
    not a driver error that ends a TUI's reader thread (its trace tail stopped for good once),
    and the connection is not left open."""
    import psycopg

    from supervisor.store.notify import PostgresListenProbe

    drained = PostgresListenProbe._drained
    killed: list[Any] = []  # the listening connection whose backend was ended

    def killed_first(connection: Any) -> list[tuple[str, str]]:
        if not killed:  # the server ends this backend, as a restart would
            killed.append(connection)
            with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (connection.info.backend_pid,))
            # Until this side has read the server's goodbye and the end of the connection.
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                select.select([connection.pgconn.socket], [], [], 0.1)
                try:
                    connection.pgconn.consume_input()
                except psycopg.OperationalError:
                    break
        return drained(connection)

    monkeypatch.setattr(PostgresListenProbe, "_drained", staticmethod(killed_first))
    with pytest.raises(LedgerUnavailable) as lost:
        follower.repository.change_probe()
    assert lost.value.code == "ledger_unavailable"
    assert killed[0].closed  # not left open
    probe = follower.repository.change_probe()  # the next try connects
    try:
        follower.propose("t", "h", {"after": "drop"})
        assert probe.wait(WAIT_S) is True
    finally:
        probe.close()
