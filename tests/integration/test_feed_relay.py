"""The feed relay: one listening connection for a host's processes (``supervisor feed-relay``).

PostgreSQL signals every listening connection at each commit that notifies, so each process
that listens costs the server on every audited write. With a relay running, the processes of a
host hear the feed through it; when it is killed they listen themselves and miss nothing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.ledgers import open_ledger
from support.postgres import listening_connections

from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider
from supervisor.store.relay import (
    RELAY_ENV,
    RelayProbe,
    RelayUnsafe,
    check_private,
    relay_socket_path,
)


def _start_relay(url: str, env: dict[str, str]) -> subprocess.Popen[str]:
    relay = subprocess.Popen(
        [sys.executable, "-c", "from supervisor.cli.main import main; main()",
         "feed-relay", "--db", url],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert relay.stdout is not None and relay.stderr is not None
    line = relay.stdout.readline()
    assert line.startswith("Relaying the change feed of"), line + relay.stderr.read()
    return relay


@pytest.fixture
def relay_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Relays' sockets under a private runtime folder of this test (a short path: a Unix
    socket's may not exceed 107 bytes)."""
    runtime = tempfile.mkdtemp(prefix="sv-relay-")
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    monkeypatch.delenv(RELAY_ENV, raising=False)
    yield {**os.environ, "XDG_RUNTIME_DIR": runtime}
    shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture
def relay(postgres_url: str, relay_env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    process = _start_relay(postgres_url, relay_env)
    yield process
    if process.poll() is None:
        process.terminate()
        process.wait(30)


@pytest.fixture
def followers(postgres_url: str) -> Iterator[list[ApprovalLedger]]:
    """Three ledgers of this process, each with a change board of its own (as three agent
    processes on the host would have)."""
    opened = [open_ledger(postgres_url) for _ in range(3)]
    yield [next(ledger) for ledger in opened]
    for ledger in opened:
        ledger.close()  # type: ignore[attr-defined]  # a generator's: closes the ledger


def _decide_later(url: str, proposal_id: str) -> threading.Thread:
    def approve() -> None:
        time.sleep(0.3)
        with SQLModelProvider(url) as provider:
            provider.ledger.approve(proposal_id, "bob@example.com", "checked")

    thread = threading.Thread(target=approve)
    thread.start()
    return thread


def _wait_all(followers: list[ApprovalLedger], ids: list[str]) -> list[Any]:
    """Each follower follows its proposal's approval in a thread of its own. The feed's
    one-second re-read is pushed out of reach by the ``no_fallback`` fixture, so a wait ends
    early only on a notice that reached it."""
    decided: list[Any] = [None] * len(followers)
    pages = [
        ledger.follow(ledger.head(), 0, actions={"approve"}, subjects={proposal_id})
        for ledger, proposal_id in zip(followers, ids, strict=True)
    ]

    def wait(index: int) -> None:
        page = followers[index].follow(pages[index], 30, actions={"approve"}, subjects={ids[index]})
        decided[index] = [record.action for record in page.records]

    threads = [threading.Thread(target=wait, args=(n,)) for n in range(len(followers))]
    for thread in threads:
        thread.start()
    return [threads, decided]


def _named_notices(ledger: ApprovalLedger) -> list[Any]:
    """What the ledger's change board is told from now on, notices naming no record left out."""
    probe = ledger._get_board().probe
    heard: list[Any] = []
    notices = probe.notices

    def recording(timeout: float) -> list[Any]:
        received = notices(timeout)
        heard.extend(notice for notice in received if notice is not None)
        return received

    probe.notices = recording  # type: ignore[method-assign]
    return heard


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    from supervisor.ledger import feed

    monkeypatch.setattr(feed, "FALLBACK_POLL_S", 120.0)


def test_processes_on_a_host_hear_the_feed_through_one_connection(
    postgres_url: str, relay: subprocess.Popen[str], followers: list[ApprovalLedger]
) -> None:
    ids = [ledger.propose("t", "h", {"n": n}).proposal_id for n, ledger in enumerate(followers)]
    heard = [_named_notices(ledger) for ledger in followers]
    threads, decided = _wait_all(followers, ids)
    time.sleep(0.5)  # all three waiting
    assert listening_connections(postgres_url) == 1  # the relay's, not one per follower
    for ledger in followers:
        probe = ledger._get_board().probe
        assert isinstance(probe, RelayProbe) and probe.relayed
    approvals = [_decide_later(postgres_url, proposal_id) for proposal_id in ids]
    for thread in [*approvals, *threads]:
        thread.join(60)
    assert decided == [["approve"]] * 3
    for notices, proposal_id in zip(heard, ids, strict=True):
        assert ("approve", proposal_id) in notices, (heard, ids)  # forwarded by the relay


def test_a_burst_reaches_a_follower_whole_in_order_and_only_what_it_listens_for(
    postgres_url: str, relay: subprocess.Popen[str], followers: list[ApprovalLedger]
) -> None:
    """Writes committed back to back reach a follower through the relay, each notice once, in
    commit order (the relay sends what one read brought in one write per client), and none of
    the writes on channels it does not listen on."""
    follower, writer = followers[0], followers[1]
    ids = [writer.propose("t", "h", {"n": n}).proposal_id for n in range(40)]
    page = follower.follow(follower.head(), 0, actions={"approve"})
    heard = _named_notices(follower)
    approved: list[str] = []

    def follow() -> None:
        nonlocal page
        deadline = time.monotonic() + 60
        while len(approved) < len(ids) and time.monotonic() < deadline:
            page = follower.follow(page, 5, actions={"approve"})
            approved.extend(record.subject for record in page.records)

    thread = threading.Thread(target=follow)
    thread.start()
    time.sleep(0.3)  # waiting through the relay
    probe = follower._get_board().probe
    assert isinstance(probe, RelayProbe) and probe.relayed
    for n, proposal_id in enumerate(ids):
        writer.approve(proposal_id, "bob@example.com", "ok")
        if n % 4 == 0:  # a write on a channel the follower does not listen on
            writer.propose("t", "h", {"other": n})
    thread.join(90)
    assert approved == ids
    # The last records may have been read before their notices came: wait them out.
    deadline = time.monotonic() + 10
    while len(heard) < len(ids) and time.monotonic() < deadline:
        assert not follower.follow(page, 0.5, actions={"approve"}).records
    assert heard == [("approve", proposal_id) for proposal_id in ids], heard


def test_a_killed_relay_leaves_its_followers_listening_themselves(
    postgres_url: str, relay: subprocess.Popen[str], followers: list[ApprovalLedger]
) -> None:
    ids = [ledger.propose("t", "h", {"n": n}).proposal_id for n, ledger in enumerate(followers)]
    threads, decided = _wait_all(followers, ids)
    time.sleep(0.5)
    os.kill(relay.pid, signal.SIGKILL)
    relay.wait(30)
    with SQLModelProvider(postgres_url) as provider:  # decided at once, while they switch
        for proposal_id in ids:
            provider.ledger.approve(proposal_id, "bob@example.com", "checked")
    for thread in threads:
        thread.join(60)
    assert decided == [["approve"]] * 3
    later = [ledger.propose("t", "h", {"later": n}).proposal_id
             for n, ledger in enumerate(followers)]  # fmt: skip
    threads, decided = _wait_all(followers, later)
    time.sleep(0.5)
    assert listening_connections(postgres_url) == 3  # each listens itself now
    approvals = [_decide_later(postgres_url, proposal_id) for proposal_id in later]
    for thread in [*approvals, *threads]:
        thread.join(60)
    assert decided == [["approve"]] * 3


def test_a_relay_for_another_ledger_is_not_used(
    postgres_url: str, relay_env: dict[str, str], followers: list[ApprovalLedger],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    other = postgres_url.rsplit("/", 1)[0] + "/postgres"
    socket_path = relay_env["XDG_RUNTIME_DIR"] + "/other.sock"
    relay = _start_relay(other, {**relay_env, RELAY_ENV: socket_path})
    try:
        monkeypatch.setenv(RELAY_ENV, socket_path)  # this ledger's processes look there
        proposal = followers[0].propose("t", "h", {"n": 1})
        threads, decided = _wait_all(followers[:1], [proposal.proposal_id])
        time.sleep(0.5)
        probe = followers[0]._get_board().probe
        assert isinstance(probe, RelayProbe) and not probe.relayed  # refused: its own LISTEN
        assert listening_connections(postgres_url) == 1
        _decide_later(postgres_url, proposal.proposal_id).join(60)
        for thread in threads:
            thread.join(60)
        assert decided == [["approve"]]
    finally:
        relay.terminate()
        relay.wait(30)


def test_a_socket_folder_others_can_open_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    with pytest.raises(RelayUnsafe) as refused:
        check_private(shared)
    assert refused.value.code == "feed_relay_unsafe"
    link = tmp_path / "link"
    link.symlink_to(shared)
    shared.chmod(0o700)
    with pytest.raises(RelayUnsafe):
        check_private(link)
    check_private(shared)


def test_the_relay_refuses_a_sqlite_ledger(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from supervisor.cli.main import main; main()",
         "feed-relay", "--db", str(tmp_path / "ledger.db")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "feed_relay_not_postgres" in done.stderr


def test_relays_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlalchemy as sa

    url = sa.make_url("postgresql+psycopg://u:secret@db.example:5432/ledger")
    monkeypatch.setenv(RELAY_ENV, "off")
    assert relay_socket_path(url) is None
    monkeypatch.delenv(RELAY_ENV)
    path = relay_socket_path(url)
    assert path is not None and "secret" not in str(path)


def test_servers_named_by_socket_folder_or_environment_get_relays_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sqlalchemy as sa

    monkeypatch.delenv(RELAY_ENV, raising=False)
    for name in ("PGHOST", "PGHOSTADDR", "PGPORT", "PGSERVICE"):
        monkeypatch.delenv(name, raising=False)

    def path(url: str) -> Path | None:
        return relay_socket_path(sa.make_url(url))

    first = path("postgresql+psycopg://u@/ledger?host=/run/pg-a")
    assert first is not None
    assert first == path("postgresql+psycopg://u:other-password@/ledger?host=/run/pg-a")
    assert first != path("postgresql+psycopg://u@/ledger?host=/run/pg-b")
    assert first != path("postgresql+psycopg://u@/ledger?host=/run/pg-a&port=5433")
    # With no server in the URL, libpq's environment names it.
    bare = path("postgresql+psycopg://u@/ledger")
    monkeypatch.setenv("PGHOST", "/run/pg-b")
    assert path("postgresql+psycopg://u@/ledger") not in (bare, first)
    # A URL naming its host keeps the socket it had (relays already running still serve it).
    monkeypatch.delenv("PGHOST")
    named = "postgresql+psycopg://u@db.example:5432/ledger"
    before = path(named)
    monkeypatch.setenv("PGHOST", "/run/pg-b")
    assert path(named) == before


def test_a_relay_restarts_over_the_socket_a_killed_one_left(
    postgres_url: str, relay_env: dict[str, str]
) -> None:
    """A second relay for a socket in use is refused; once the first is killed (its socket
    file left behind) a new one takes the socket over."""
    first = _start_relay(postgres_url, relay_env)
    try:
        second = subprocess.run(
            [sys.executable, "-c", "from supervisor.cli.main import main; main()",
             "feed-relay", "--db", postgres_url],
            env=relay_env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 2
        assert "feed_relay_running" in second.stderr
        os.kill(first.pid, signal.SIGKILL)
        first.wait(30)
        import sqlalchemy as sa

        path = relay_socket_path(sa.make_url(postgres_url))
        assert path is not None and path.exists()  # left by the killed relay
        third = _start_relay(postgres_url, relay_env)
        third.terminate()
        assert third.wait(30) == 0
        assert not path.exists()  # a relay that stops removes its socket
    finally:
        if first.poll() is None:
            first.kill()
