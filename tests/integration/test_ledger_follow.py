"""Following only some of the change feed: ``follow`` and the change board.

On PostgreSQL each audit record's NOTIFY names the record, so a waiter for one proposal is not
woken by writes to others, and threads sharing one ledger each see the notices they wait for.
Writers here are separate processes, as an agent and an approver would be.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.ledgers import open_ledger
from support.postgres import listening_connections, statements_sent

from supervisor.ledger.service import ApprovalLedger
from supervisor.store.notify import (
    ALL_CHANNELS,
    CHANNEL,
    ChangeBoard,
    notice_channel,
    notice_payload,
)

_WRITER = """
import sys
from supervisor.store.provider import SQLModelProvider

url, verb, *rest = sys.argv[1:]
with SQLModelProvider(url) as provider:
    if verb == "propose":
        print(provider.ledger.propose("t", "h", {"n": rest[0]}).proposal_id)
    else:
        provider.ledger.approve(rest[0], "bob@example.com")
"""


def _write(url: str, verb: str, arg: str) -> str:
    """Propose (``arg``: a distinguishing value) or approve (``arg``: an id) in a new process."""
    done = subprocess.run(
        [sys.executable, "-c", _WRITER, url, verb, arg],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def pg_ledger(postgres_url: str) -> Iterator[ApprovalLedger]:
    """A ledger on a fresh PostgreSQL database with the real clock (other processes write)."""
    yield from open_ledger(postgres_url)


def test_follow_returns_matching_records_and_moves_past_the_rest(ledger: ApprovalLedger) -> None:
    cursor = ledger.head()
    first = ledger.propose("t", "h", {"a": 1})
    second = ledger.propose("t", "h", {"a": 2})
    ledger.approve(second.proposal_id, "alice")
    ledger.approve(first.proposal_id, "alice")

    approvals = ledger.follow(cursor, 0, actions={"approve"})
    assert [r.subject for r in approvals.records] == [second.proposal_id, first.proposal_id]
    assert approvals.cursor == ledger.head()

    about_first = ledger.follow(cursor, 0, subjects={first.proposal_id})
    assert [r.action for r in about_first.records] == ["propose", "approve"]

    nothing = ledger.follow(cursor, 0, actions={"approve"}, subjects={"no-such-proposal"})
    assert nothing.records == []
    assert nothing.cursor == ledger.head()  # read through, not left behind the others
    assert ledger.follow(nothing, 0).records == []


def test_follow_pages_by_limit_with_many_subjects(ledger: ApprovalLedger) -> None:
    cursor = ledger.head()
    ids = [ledger.propose("t", "h", {"a": n}).proposal_id for n in range(5)]
    # More subjects than are sent to the server: they are filtered after the read.
    subjects = {*ids[1::2], *(f"other-{n}" for n in range(600))}
    seen: list[str] = []
    page = ledger.follow(cursor, 0, subjects=subjects, limit=2)
    while page.records or not page.caught_up:
        seen.extend(record.subject for record in page.records)
        page = ledger.follow(page, 0, subjects=subjects, limit=2)
    assert seen == ids[1::2]
    assert page.cursor == ledger.head()


def test_a_follower_reads_the_feed_in_one_statement(
    pg_ledger: ApprovalLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every process of a team follows the feed: on PostgreSQL a read is the tip and the
    matching records in one statement (one round trip), whatever the filters."""
    cursor = pg_ledger.head()
    ids = [pg_ledger.propose("t", "h", {"n": n}).proposal_id for n in range(3)]
    pg_ledger.approve(ids[1], "alice")
    pg_ledger.approve(ids[0], "alice")
    sent = statements_sent(monkeypatch)
    reads: list[tuple[list[str], int, bool]] = []
    for actions, subjects in ((None, None), ({"approve"}, None), (None, {ids[1]}),
                              ({"approve"}, {ids[1], ids[2]})):  # fmt: skip
        before = len(sent)
        page = pg_ledger.follow(cursor, 0, actions=actions, subjects=subjects)
        reads.append(([r.subject for r in page.records], len(sent) - before, page.caught_up))
    before = len(sent)
    page = pg_ledger.follow(pg_ledger.head(), 0)  # nothing past the tip
    past_tip = (page.records, len(sent) - before - 1, page.caught_up)  # -1: head()'s own read
    monkeypatch.undo()
    assert reads == [
        ([*ids, ids[1], ids[0]], 1, True),
        ([ids[1], ids[0]], 1, True),
        ([ids[1], ids[1]], 1, True),
        ([ids[1]], 1, True),
    ]
    assert past_tip == ([], 1, True)


def test_notify_names_the_audit_record(postgres_url: str, pg_ledger: ApprovalLedger) -> None:
    with psycopg.connect(
        postgres_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
    ) as listener:
        for channel in sorted(ALL_CHANNELS):
            listener.execute(f"LISTEN {channel}")
        proposal = pg_ledger.propose("t", "h", {"a": 1})
        heard = [(n.channel, n.payload) for n in listener.notifies(timeout=10, stop_after=1)]
    assert [(channel, json.loads(p)) for channel, p in heard] == [
        ("supervisor_ledger_propose", [pg_ledger.head(), "propose", proposal.proposal_id])
    ]


def test_a_wait_for_one_proposal_is_not_woken_by_writes_to_others(
    postgres_url: str, pg_ledger: ApprovalLedger
) -> None:
    mine = pg_ledger.propose("t", "h", {"mine": True})
    board = ChangeBoard(pg_ledger.repository.change_probe())
    try:
        mark = board.mark()

        def interest(action: str, subject: str) -> bool:
            return subject == mine.proposal_id

        _write(postgres_url, "propose", "another agent's call")
        deadline = time.monotonic() + 30
        while board.mark() == mark and time.monotonic() < deadline:
            assert board.wait(mark, 0.2, interest) is False
        assert board.mark() > mark  # the other write's notice came, and did not end the wait
        _write(postgres_url, "approve", mine.proposal_id)
        assert board.wait(mark, 30, interest) is True
    finally:
        board.probe.close()


def test_threads_sharing_a_ledger_each_see_their_own_notice(
    postgres_url: str, pg_ledger: ApprovalLedger
) -> None:
    first = pg_ledger.propose("t", "h", {"a": 1})
    second = pg_ledger.propose("t", "h", {"a": 2})
    cursor = pg_ledger.head()
    decided: dict[str, list[str]] = {}

    def follower(proposal_id: str) -> None:
        page = pg_ledger.follow(cursor, 30, subjects={proposal_id})
        decided[proposal_id] = [record.action for record in page.records]

    threads = [threading.Thread(target=follower, args=(p.proposal_id,)) for p in (first, second)]
    for thread in threads:
        thread.start()
    _write(postgres_url, "approve", second.proposal_id)
    _write(postgres_url, "approve", first.proposal_id)
    for thread in threads:
        thread.join(60)
    assert decided == {first.proposal_id: ["approve"], second.proposal_id: ["approve"]}


def test_wait_decided_returns_the_decision_made_in_another_process(
    postgres_url: str, pg_ledger: ApprovalLedger
) -> None:
    proposal = pg_ledger.propose("t", "h", {"a": 1})
    other = threading.Thread(target=_write, args=(postgres_url, "propose", "noise"))
    approver = threading.Thread(target=_write, args=(postgres_url, "approve", proposal.proposal_id))
    other.start()
    approver.start()
    decided = pg_ledger.wait_decided(proposal.proposal_id, timeout=60)
    other.join()
    approver.join()
    assert decided.status.value == "approved"


def test_a_sweep_notifies_each_expired_proposal_in_order(
    postgres_url: str, pg_ledger: ApprovalLedger
) -> None:
    """A batched expiry sweep still sends one notice per record, naming it, in seq order, so
    a waiter for one of those proposals wakes."""
    ids = [pg_ledger.propose("t", "h", {"n": n}, ttl_seconds=0.2).proposal_id for n in range(30)]
    head = pg_ledger.head()
    time.sleep(0.3)
    with psycopg.connect(
        postgres_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
    ) as listener:
        for channel in sorted(ALL_CHANNELS):
            listener.execute(f"LISTEN {channel}")
        expired = pg_ledger.expire_due()
        heard = [(n.channel, n.payload) for n in listener.notifies(timeout=10, stop_after=30)]
    assert sorted(expired) == sorted(ids)
    assert [(channel, json.loads(p)) for channel, p in heard] == [
        (notice_channel("expire"), [head + n + 1, "expire", subject])
        for n, subject in enumerate(expired)
    ]


def test_a_follower_checks_each_notice_once_however_long_it_keeps_its_page(
    postgres_url: str, pg_ledger: ApprovalLedger
) -> None:
    """A follower that keeps its page while a busy team writes (its mark stays put until it
    reads again, up to a second) looks at each notice once, not once per wake-up: 300
    notices about other proposals, arriving a few at a time, cost ~300 checks, not ~45,000."""
    mine = pg_ledger.propose("t", "h", {"mine": True})
    actions, subjects = {"approve"}, {mine.proposal_id}
    page = pg_ledger.follow(pg_ledger.head(), 0, actions=actions, subjects=subjects)
    board = pg_ledger._get_board()
    looked_at: list[int] = []
    scan = board._scan

    def counting_scan(since: int, interest: Any) -> tuple[bool, int]:
        looked_at.append(max(0, board.mark() - since))
        return scan(since, interest)

    board._scan = counting_scan  # type: ignore[method-assign]
    sent = 300

    def others() -> None:
        with psycopg.connect(
            postgres_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
        ) as writer:
            for n in range(sent):
                payload = notice_payload(10**6 + n, "propose", f"other-{n}")
                writer.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
                time.sleep(0.002)

    writer = threading.Thread(target=others)
    writer.start()
    wakeups = 0
    while writer.is_alive() or board.mark() < sent:
        page = pg_ledger.follow(page, 0.01, actions=actions, subjects=subjects)
        assert page.records == []
        wakeups += 1
        assert wakeups < 100_000
    writer.join()
    assert board.mark() >= sent
    assert len(looked_at) > 50, "the notices came a few at a time"
    assert sum(looked_at) <= 2 * sent


def _cycle(writer: ApprovalLedger, n: int) -> str:
    """One proposal through propose, approve, claim and complete; its id."""
    proposal = writer.propose("t", "h", {"cycle": n})
    writer.approve(proposal.proposal_id, "bob@example.com")
    writer.claim(proposal.proposal_id, proposal.args_hash, executor="worker")
    writer.complete(proposal.proposal_id, "success", executor="worker")
    return proposal.proposal_id


def test_a_follower_of_some_actions_is_sent_only_theirs(
    postgres_url: str, pg_ledger: ApprovalLedger
) -> None:
    """Each proposal action notifies a channel of its own, and a process's board listens only
    where its followers need: a follower of approvals is not even sent the proposes, claims
    and completions of a busy team (each would cost it a wake-up), yet hears every approval."""
    from supervisor.store.provider import SQLModelProvider

    page = pg_ledger.follow(pg_ledger.head(), 0.05, actions={"approve"})  # opens the board
    board = pg_ledger._get_board()
    heard: list[Any] = []
    notices = board.probe.notices

    def recording(timeout: float) -> list[Any]:
        received = notices(timeout)
        heard.extend(received)
        return received

    board.probe.notices = recording  # type: ignore[method-assign]
    with SQLModelProvider(postgres_url) as provider:
        ids = [_cycle(provider.ledger, n) for n in range(5)]
    approved: list[str] = []
    deadline = time.monotonic() + 30
    while len(approved) < len(ids) and time.monotonic() < deadline:
        page = pg_ledger.follow(page, 5, actions={"approve"})
        approved += [record.subject for record in page.records]
    assert approved == ids
    named = [notice for notice in heard if notice is not None]
    assert named, "the approvals' notices reached the follower"
    assert {action for action, _ in named} == {"approve"}


def test_a_follower_that_widens_its_interest_misses_nothing(
    postgres_url: str, pg_ledger: ApprovalLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A board adds a channel when a follower first needs it. Notices sent to it before its
    LISTEN are lost, so the board tells every waiter to re-read once it listens; and a thread
    already blocked reading the probe is woken to add it. With the feed's one-second re-read
    pushed out of reach, a completion committed before the wait is still found at once."""
    from supervisor.ledger import feed
    from supervisor.store.provider import SQLModelProvider

    monkeypatch.setattr(feed, "FALLBACK_POLL_S", 120.0)
    pg_ledger.follow(pg_ledger.head(), 0.05, actions={"reject"})  # listens for rejections
    board = pg_ledger._get_board()
    reader = threading.Thread(
        target=pg_ledger.follow, args=(pg_ledger.head(), 60), kwargs={"actions": {"reject"}}
    )
    reader.start()  # nobody rejects: it blocks reading the probe
    deadline = time.monotonic() + 30
    while not board._reading and time.monotonic() < deadline:
        time.sleep(0.01)
    assert board._reading
    calls: list[tuple[str, int]] = []  # what the board asked of its probe, at which position
    listen, notices = board.probe.listen, board.probe.notices

    def listening(channels: Any) -> None:
        calls.append(("listen", board.mark()))
        listen(channels)

    def reading(timeout: float) -> list[Any]:
        calls.append(("read", board.mark()))
        return notices(timeout)

    board.probe.listen = listening  # type: ignore[method-assign]
    board.probe.notices = reading  # type: ignore[method-assign]
    page = pg_ledger.follow(pg_ledger.head(), 0, actions={"complete"})
    with SQLModelProvider(postgres_url) as provider:
        done = _cycle(provider.ledger, 0)  # its completion's channel is not listened on yet
        page = pg_ledger.follow(page, 20, actions={"complete"})
        assert [(r.action, r.subject) for r in page.records] == [("complete", done)]
        ended = provider.ledger.propose("t", "h", {"end": True})
        provider.ledger.reject(ended.proposal_id, "bob@example.com")  # what the reader waits for
    reader.join(30)
    assert not reader.is_alive()
    # The re-read notice is posted as soon as the LISTEN is in, not after the next read
    # (which could wait out the reader's whole timeout).
    listened_at = next(mark for call, mark in calls if call == "listen")
    after = calls[calls.index(("listen", listened_at)) + 1 :]
    assert after and after[0][0] == "read" and after[0][1] > listened_at


@pytest.mark.parametrize("pause", [0.0, 0.01, 0.05, 0.2])
def test_closing_a_probe_ends_a_wait_in_another_thread(
    pg_ledger: ApprovalLedger, pause: float
) -> None:
    """``close`` wakes a wait running in another thread and closes the connection only once
    the wait has given it up: a descriptor closed under a running ``epoll`` wait drops its
    wake-up, and the wait would sleep on to its timeout. Then the next wait listens anew."""
    probe = pg_ledger.repository.change_probe()

    def wait(into: list[Any]) -> None:
        into.append(probe.notices(60))

    try:
        for _ in range(5):
            waited: list[Any] = []
            waiter = threading.Thread(target=wait, args=(waited,))
            waiter.start()
            time.sleep(pause)
            probe.close()
            waiter.join(30)
            assert not waiter.is_alive()
            assert waited in ([[]], [[None]])  # woken, or it started after the close
        assert probe.notices(0) == [None]  # listening again: what was sent meanwhile is lost
    finally:
        probe.close()


def test_an_idle_board_gives_its_listening_connection_back(
    postgres_url: str, pg_ledger: ApprovalLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL signals every listening connection at each commit that notifies, so a process
    that stopped following gives its connection up; its next wait listens again and misses
    nothing committed meanwhile."""
    from supervisor.store import notify
    from supervisor.store.provider import SQLModelProvider

    monkeypatch.setattr(notify, "IDLE_RELEASE_S", 0.5)
    page = pg_ledger.follow(pg_ledger.head(), 0.05, actions={"approve"})
    assert listening_connections(postgres_url) == 1
    deadline = time.monotonic() + 30
    while listening_connections(postgres_url) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert listening_connections(postgres_url) == 0
    with SQLModelProvider(postgres_url) as provider:
        mine = provider.ledger.propose("t", "h", {"while": "idle"})
        provider.ledger.approve(mine.proposal_id, "bob@example.com")  # nobody listening
        page = pg_ledger.follow(page, 20, actions={"approve"})
        assert [(r.action, r.subject) for r in page.records] == [("approve", mine.proposal_id)]
        assert listening_connections(postgres_url) == 1
        later = provider.ledger.propose("t", "h", {"while": "listening"})
        waited: list[Any] = []
        waiter = threading.Thread(
            target=lambda: waited.append(pg_ledger.follow(page, 20, actions={"approve"}))
        )
        waiter.start()
        provider.ledger.approve(later.proposal_id, "bob@example.com")
        waiter.join(30)
    assert [(r.action, r.subject) for r in waited[0].records] == [("approve", later.proposal_id)]


def test_a_board_on_sqlite_keeps_no_idle_timer(tmp_path: Path) -> None:
    """Polling a local file holds nothing of a server's: no timer thread waits to give it up."""
    from supervisor.store.notify import ChangeBoard
    from supervisor.store.provider import SQLModelProvider

    with SQLModelProvider(f"sqlite:///{tmp_path / 'ledger.db'}") as provider:
        board = ChangeBoard(provider.ledger.repository.change_probe(), idle_release_s=5)
        timers_before = sum(isinstance(t, threading.Timer) for t in threading.enumerate())
        assert board.wait(board.mark(), 0.05) is False
        assert sum(isinstance(t, threading.Timer) for t in threading.enumerate()) == timers_before
        board.close()
