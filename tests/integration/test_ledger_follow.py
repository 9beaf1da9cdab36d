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
from typing import Any

import psycopg
import pytest
from support.ledgers import open_ledger

from supervisor.ledger.service import ApprovalLedger
from supervisor.store.notify import CHANNEL, ChangeBoard, notice_payload

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


def test_notify_names_the_audit_record(postgres_url: str, pg_ledger: ApprovalLedger) -> None:
    with psycopg.connect(
        postgres_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
    ) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        proposal = pg_ledger.propose("t", "h", {"a": 1})
        payloads = [n.payload for n in listener.notifies(timeout=10, stop_after=1)]
    assert [json.loads(p) for p in payloads] == [
        [pg_ledger.head(), "propose", proposal.proposal_id]
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
        listener.execute(f"LISTEN {CHANNEL}")
        expired = pg_ledger.expire_due()
        payloads = [n.payload for n in listener.notifies(timeout=10, stop_after=30)]
    assert sorted(expired) == sorted(ids)
    assert [json.loads(p) for p in payloads] == [
        [head + n + 1, "expire", subject] for n, subject in enumerate(expired)
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
