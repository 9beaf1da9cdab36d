"""The open set (``proposal_open``) is exactly the proposals that are not terminal after every
write the ledger makes, and no proposal index holds a column that a decision changes."""

from __future__ import annotations

import importlib
from datetime import datetime

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

from supervisor.ledger import ManualClock, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.convert import proposal_to_values
from supervisor.store.engine import create_ledger_engine
from supervisor.store.migrate import ensure_schema, upgrade
from supervisor.store.repository import Repository

_OPEN = SQLModel.metadata.tables["proposal_open"]
#: The proposal columns no status change, decision or edit ever writes.
_NEVER_CHANGED = {"id", "created_at", "owner", "thread_id", "tool_name", "runtime"}

Row = tuple[datetime, datetime]


def _open_set(engine: Engine) -> dict[str, Row]:
    with engine.connect() as connection:  # through the table's types: tz-aware UTC on both
        rows = connection.execute(sa.select(_OPEN)).all()
    return {row.proposal_id: (row.created_at, row.expires_at) for row in rows}


def _not_terminal(ledger: ApprovalLedger) -> dict[str, Row]:
    """What the open set must hold, from the ledger's reads of every proposal."""
    proposals = [proposal for proposal, _ in ledger.proposals_with_executions(limit=1000)]
    return {p.proposal_id: (p.created_at, p.expires_at) for p in proposals if not p.status.terminal}


def _check(engine: Engine, ledger: ApprovalLedger) -> dict[str, Row]:
    found = _open_set(engine)
    assert found == _not_terminal(ledger)
    return found


def test_the_migration_lists_what_is_not_terminal() -> None:
    """Migration 0011 filled the open set of an older ledger with the statuses that were open
    then; a new status that is not terminal needs a migration that adds its proposals."""
    migration = importlib.import_module("supervisor.store.migrations.versions.0011_proposal_open")
    assert set(migration.OPEN_STATUSES) == {s.value for s in ProposalStatus if not s.terminal}


def test_no_proposal_index_holds_a_column_a_decision_changes(engine: Engine) -> None:
    """Else no status UPDATE on PostgreSQL is HOT, and each rewrites every index under the
    audit chain's lock (docs/scale.md)."""
    ApprovalLedger(engine).close()  # brings the schema current
    with engine.connect() as connection:
        indexes = sa.inspect(connection).get_indexes("proposal")
    assert indexes  # the lookups by creation, owner, thread, tool and runtime are still there
    for index in indexes:
        assert set(index["column_names"]) <= _NEVER_CHANGED, index


def test_every_transition_keeps_the_open_set(
    engine: Engine, ledger: ApprovalLedger, clock: ManualClock
) -> None:
    def propose(n: int, ttl: float = 3600) -> str:
        return ledger.propose("tool", "s", {"n": n}, ttl_seconds=ttl).proposal_id

    pending = propose(1)
    approved = propose(2)
    ledger.approve(approved, "alice")
    assert approved in _check(engine, ledger)
    ledger.reject(propose(3), "alice")
    ledger.cancel(propose(4), "agent")
    done = ledger.approve(propose(5), "alice")
    ledger.claim(done.proposal_id, done.args_hash)
    assert done.proposal_id in _check(engine, ledger)
    ledger.complete(done.proposal_id)
    failed = ledger.approve(propose(6), "alice")
    ledger.claim(failed.proposal_id, failed.args_hash)
    ledger.fail(failed.proposal_id, "boom")
    edited = propose(7)
    successor = ledger.edit(edited, {"n": 70}, "alice")
    found = _check(engine, ledger)
    assert edited not in found and successor.proposal_id in found
    lost = ledger.approve(propose(8), "alice")
    ledger.claim(lost.proposal_id, lost.args_hash)
    assert [e.proposal_id for e in ledger.recover(lambda pid, host: False)] == [lost.proposal_id]
    assert lost.proposal_id in _check(engine, ledger)
    ledger.reconcile(lost.proposal_id, "failed", "bob", "it never ran")
    first, second = propose(9), propose(10)
    outcomes = ledger.approve_many([first, second], "alice")
    assert [o.status for o in outcomes if not isinstance(o, Exception)] == [
        ProposalStatus.APPROVED, ProposalStatus.APPROVED
    ]  # fmt: skip
    short_pending, short_approved = propose(11, ttl=10), propose(12, ttl=10)
    ledger.approve(short_approved, "alice")
    extended = propose(13, ttl=10)
    later = ledger.extend(extended, 5, "alice").expires_at
    assert _check(engine, ledger)[extended][1] == later  # the open row moved with it
    clock.advance(10)
    assert sorted(ledger.expire_due()) == sorted([short_pending, short_approved])
    clock.advance(5)
    assert ledger.expire_due() == [extended]
    found = _check(engine, ledger)
    assert set(found) == {pending, approved, successor.proposal_id, first, second}
    # Terminal proposals purged: the open set is untouched.
    clock.advance(86400 * 2)
    assert ledger.purge(older_than_days=1).purged
    assert set(_check(engine, ledger)) == {pending, approved, successor.proposal_id, first, second}


def test_the_status_in_the_proposal_row_decides(engine: Engine, clock: ManualClock) -> None:
    """The open set only narrows the search: a status changed by hand (psql, a script), which
    leaves its open row behind, is still listed and swept by its real status."""
    ledger = ApprovalLedger(engine, clock)
    try:
        kept, rejected = (
            ledger.propose("tool", "s", {"n": n}, ttl_seconds=10).proposal_id for n in range(2)
        )
        with engine.begin() as connection:
            connection.execute(
                sa.text("UPDATE proposal SET status = 'rejected' WHERE id = :id"),
                {"id": rejected},
            )
        assert set(_open_set(engine)) == {kept, rejected}  # left behind
        assert [p.proposal_id for p in ledger.list(status="pending").items] == [kept]
        assert ledger.list(status="rejected").items[0].proposal_id == rejected
        clock.advance(10)
        assert ledger.expire_due() == [kept]
        assert ledger.get(rejected).status is ProposalStatus.REJECTED
    finally:
        ledger.close()


def test_an_older_ledger_gets_its_open_set(ledger_url: str) -> None:
    """Migrating a schema-10 ledger fills the open set from the proposals it holds: its
    inbox and expiry sweep find them."""
    engine = create_ledger_engine(ledger_url)
    clock = ManualClock()
    try:
        with engine.begin() as connection:
            upgrade(connection, "0010")
        made = ApprovalLedger(create_ledger_engine("sqlite://"), clock)
        pending = made.propose("tool", "s", {"n": 1}, ttl_seconds=10)
        approved = made.approve(made.propose("tool", "s", {"n": 2}).proposal_id, "alice")
        rejected = made.reject(made.propose("tool", "s", {"n": 3}).proposal_id, "alice")
        with engine.begin() as connection:
            for proposal in (pending, approved, rejected):
                values = proposal_to_values(proposal)
                connection.execute(sa.table("proposal", *map(sa.column, values)).insert(), values)
        ensure_schema(engine)
        ledger = ApprovalLedger(Repository(engine), clock)
        try:
            assert set(_check(engine, ledger)) == {pending.proposal_id, approved.proposal_id}
            assert [p.proposal_id for p in ledger.list(status="pending").items] == [
                pending.proposal_id
            ]
            clock.advance(10)
            assert ledger.expire_due() == [pending.proposal_id]
            assert set(_check(engine, ledger)) == {approved.proposal_id}
        finally:
            ledger.close()
    finally:
        engine.dispose()


@pytest.mark.parametrize("newest_first", [False, True])
def test_the_open_statuses_page_in_creation_order(
    ledger: ApprovalLedger, clock: ManualClock, newest_first: bool
) -> None:
    """Pages of open statuses come from the open set, in the same (created_at, id) order and
    with the same cursors as any other listing."""
    made = []
    for n in range(7):
        made.append(ledger.propose("tool", "s", {"n": n}).proposal_id)
        if n % 3 == 0:
            ledger.approve(made[-1], "alice")
        clock.advance(0.5 if n % 2 else 0)  # some share a creation time: the id breaks ties
    wanted = [
        p.proposal_id
        for p in ledger.list(limit=100, newest_first=newest_first).items
        if p.status in (ProposalStatus.PENDING, ProposalStatus.APPROVED)
    ]
    seen: list[str] = []
    cursor = None
    while True:
        page = ledger.list(
            status=("pending", "approved"), limit=2, cursor=cursor, newest_first=newest_first
        )
        seen += [p.proposal_id for p in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == wanted and len(seen) == 7
