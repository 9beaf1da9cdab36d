"""The repository: the only code that opens sessions on the ledger engine.

Writes go through :meth:`Repository.write`, which serialises audited writers across processes
and hosts: SQLite transactions begin with ``BEGIN IMMEDIATE``; PostgreSQL transactions take
``pg_advisory_xact_lock`` first (sent with the first statement, in one round trip), or, for the
hot steps (``late_lock``), with the writes after a guarded read. Inside, the next audit seq is
written with no gap (:mod:`supervisor.store.audit_log`). The hot statements run on the driver
connection directly, and on PostgreSQL a step's writes go in one pipeline
(:mod:`supervisor.store.transaction`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel, col, select

from supervisor.ledger.audit import GENESIS_HASH
from supervisor.ledger.models import (
    Execution,
    ExecutorIdentity,
    Proposal,
    ProposalStatus,
)
from supervisor.ledger.policy import POLICY_SUBJECT, PolicyInForce
from supervisor.store.audit_log import SELECT_SUBJECT_AUDIT, AuditEntry, AuditLog
from supervisor.store.convert import (
    EXECUTION_PREFIX,
    audit_from_row,
    domain_values,
    execution_from_row,
    execution_start_values,
    joined_execution,
    open_values,
    proposal_columns,
    proposal_from_row,
    proposal_to_values,
)
from supervisor.store.direct import DriverTransaction, RowsNotMatched
from supervisor.store.engine import WRITE_OPTION
from supervisor.store.errors import translate_errors
from supervisor.store.expiry import ExpiryMixin
from supervisor.store.grants import LIVE_GRANT_PROBE, NO_LIVE_GRANT_GUARD, GrantsMixin
from supervisor.store.ids import IdsMixin
from supervisor.store.leases import LeasesMixin
from supervisor.store.notify import ALL_CHANNELS, TRACE_CHANNEL, ChangeProbe
from supervisor.store.operators import OperatorsMixin
from supervisor.store.policy_versions import POLICY_IN_FORCE_COLUMNS, PolicyVersionsMixin
from supervisor.store.registry import RegistryMixin
from supervisor.store.runs import RunsMixin
from supervisor.store.semantic_cache import SemanticCacheMixin
from supervisor.store.tables import (
    AuditRow,
    ExecutionRow,
    ProposalDomainRow,
    ProposalOpenRow,
    ProposalRow,
)
from supervisor.store.transaction import AUDIT_LOCK_KEY
from supervisor.store.webhooks import WebhooksMixin

__all__ = ["AUDIT_LOCK_KEY", "AuditEntry", "LedgerTx", "Repository", "RowsNotMatched"]

_PROPOSAL = SQLModel.metadata.tables[ProposalRow.__tablename__]
_EXECUTION = SQLModel.metadata.tables[ExecutionRow.__tablename__]
_DOMAIN = SQLModel.metadata.tables[ProposalDomainRow.__tablename__]
_OPEN = SQLModel.metadata.tables[ProposalOpenRow.__tablename__]
_AUDIT = SQLModel.metadata.tables[AuditRow.__tablename__]

# Hot-path statements, built once: executing a prebuilt statement with plain parameter dicts
# skips statement construction and cache-key generation on every call.
_SELECT_PROPOSAL = sa.select(_PROPOSAL).where(_PROPOSAL.c.id == sa.bindparam("w_id"))
# Several proposals by id: one statement text for any number of ids (PostgreSQL binds an
# array, so the connection keeps one prepared statement; SQLite expands the list).
_SELECT_PROPOSALS_PG = sa.select(_PROPOSAL).where(
    _PROPOSAL.c.id == sa.any_(sa.bindparam("w_ids", type_=sa.ARRAY(sa.String)))
)
_SELECT_PROPOSALS = sa.select(_PROPOSAL).where(
    _PROPOSAL.c.id.in_(sa.bindparam("w_ids", expanding=True))
)
_IDS_PER_STATEMENT = 500
_SELECT_EXECUTION = sa.select(_EXECUTION).where(
    _EXECUTION.c.proposal_id == sa.bindparam("w_proposal_id")
)
# The audit chain tip (seq, hash) as two columns of a statement that reads something else.
_TIP_COLUMNS = (
    sa.select(_AUDIT.c.seq).order_by(_AUDIT.c.seq.desc()).limit(1).scalar_subquery()
    .label("tip_seq"),
    sa.select(_AUDIT.c.hash).order_by(_AUDIT.c.seq.desc()).limit(1).scalar_subquery()
    .label("tip_hash"),
)  # fmt: skip
# A write's first read: the proposal, its execution (if claimed), the audit chain tip and the
# approval policy in force in one statement; tip and policy are primary-key index seeks.
_SELECT_FOR_WRITE = (
    sa.select(
        _PROPOSAL,
        *[column.label(EXECUTION_PREFIX + column.name) for column in _EXECUTION.c],
        *_TIP_COLUMNS,
        *POLICY_IN_FORCE_COLUMNS,
    )
    .select_from(_PROPOSAL.outerjoin(_EXECUTION, _EXECUTION.c.proposal_id == _PROPOSAL.c.id))
    .where(_PROPOSAL.c.id == sa.bindparam("w_id"))
)


# The newest audit seq of one subject (0: none), as a column: a backward seek of
# ix_audit_subject.
def _subject_seq(subject: Any, label: str) -> Any:
    return (
        sa.select(sa.func.coalesce(sa.func.max(_AUDIT.c.seq), 0))
        .where(_AUDIT.c.subject == subject)
        .scalar_subquery()
        .label(label)
    )


_POLICY_SEQ = _subject_seq(sa.literal(POLICY_SUBJECT), "policy_seq")
# The first read of a write that takes the chain lock late (see TransactionBase): no chain tip
# (the server chains the records under the lock), and the newest audit seqs of the proposal
# and of the policy, which the lock's guard checks again.
_LATE_WRITE_COLUMNS = sa.select(
    _PROPOSAL,
    *[column.label(EXECUTION_PREFIX + column.name) for column in _EXECUTION.c],
    *POLICY_IN_FORCE_COLUMNS,
    _subject_seq(_PROPOSAL.c.id, "subject_seq"),
    _POLICY_SEQ,
).select_from(_PROPOSAL.outerjoin(_EXECUTION, _EXECUTION.c.proposal_id == _PROPOSAL.c.id))
_SELECT_FOR_LATE_WRITE = _LATE_WRITE_COLUMNS.where(_PROPOSAL.c.id == sa.bindparam("w_id"))
# A new proposal's first read: the policy in force and the audit chain tip in one statement.
_IN_FORCE_AND_TIP = sa.select(
    *POLICY_IN_FORCE_COLUMNS,
    *_TIP_COLUMNS,
)
# A call's first read in a write that takes the chain lock late: no tip, and the policy's
# newest audit seq for the guard; with or without the live grant probe.
_IN_FORCE_LATE = sa.select(*POLICY_IN_FORCE_COLUMNS, _POLICY_SEQ)
_IN_FORCE_AND_GRANT_LATE = sa.select(*POLICY_IN_FORCE_COLUMNS, _POLICY_SEQ, LIVE_GRANT_PROBE)
# The same, and whether the call's tool has a live grant (see GrantsMixin.probe_grants).
_IN_FORCE_TIP_AND_GRANT = sa.select(*POLICY_IN_FORCE_COLUMNS, *_TIP_COLUMNS, LIVE_GRANT_PROBE)
# Every proposal with its execution (if claimed), in id order, for the audit replay.
_SELECT_WITH_EXECUTIONS = (
    sa.select(_PROPOSAL, *[column.label(EXECUTION_PREFIX + column.name) for column in _EXECUTION.c])
    .select_from(_PROPOSAL.outerjoin(_EXECUTION, _EXECUTION.c.proposal_id == _PROPOSAL.c.id))
    .where(_PROPOSAL.c.id > sa.bindparam("w_after"))
    .order_by(_PROPOSAL.c.id)
    .limit(sa.bindparam("w_limit"))
)
_INSERT_PROPOSAL = sa.insert(_PROPOSAL)
# The open set (``proposal_open``), kept by the writes that make, close or move an open
# proposal, in their transaction (and pipeline): a decision between open statuses (approve,
# claim, flag for reconciliation) writes nothing there.
_INSERT_OPEN = sa.insert(_OPEN)
_CLOSE_OPEN = sa.delete(_OPEN).where(_OPEN.c.proposal_id == sa.bindparam("w_id"))
_MOVE_OPEN = (
    sa.update(_OPEN)
    .where(_OPEN.c.proposal_id == sa.bindparam("w_id"))
    .values(expires_at=sa.bindparam("v_expires_at"))
)
_INSERT_DOMAIN = sa.insert(_DOMAIN)
_INSERT_EXECUTION = sa.insert(_EXECUTION)
_NOTIFY = sa.text("SELECT pg_notify(:channel, :seq)")
_UPDATE_PROPOSAL_CACHE: dict[tuple[Any, ...], Any] = {}


_UPDATE_EXECUTION_CACHE: dict[tuple[Any, ...], Any] = {}


def _update_proposal_statement(
    columns: tuple[str, ...],
    expires_after: bool,
    expires_at: bool,
    args_hash: bool,
    returning: bool,
) -> Any:
    """The conditional proposal UPDATE for this shape, built once per shape."""
    key = (columns, expires_after, expires_at, args_hash, returning)
    statement = _UPDATE_PROPOSAL_CACHE.get(key)
    if statement is None:
        condition = [
            _PROPOSAL.c.id == sa.bindparam("w_id"),
            _PROPOSAL.c.status == sa.bindparam("w_status"),
        ]
        if expires_after:
            condition.append(_PROPOSAL.c.expires_at > sa.bindparam("w_expires_after"))
        if expires_at:
            condition.append(_PROPOSAL.c.expires_at == sa.bindparam("w_expires_at"))
        if args_hash:
            condition.append(_PROPOSAL.c.args_hash == sa.bindparam("w_args_hash"))
        statement = (
            sa.update(_PROPOSAL)
            .where(*condition)
            .values({name: sa.bindparam(f"v_{name}") for name in columns})
        )
        if returning:
            statement = statement.returning(*_PROPOSAL.c)
        _UPDATE_PROPOSAL_CACHE[key] = statement
    return statement


def _update_execution_statement(columns: tuple[str, ...]) -> Any:
    """The conditional execution UPDATE for these columns, built once per shape."""
    statement = _UPDATE_EXECUTION_CACHE.get(columns)
    if statement is None:
        statement = (
            sa.update(_EXECUTION)
            .where(
                _EXECUTION.c.proposal_id == sa.bindparam("w_proposal_id"),
                _EXECUTION.c.state == sa.bindparam("w_state"),
            )
            .values({name: sa.bindparam(f"v_{name}") for name in columns})
        )
        _UPDATE_EXECUTION_CACHE[columns] = statement
    return statement


class LedgerTx(  # type: ignore[override]  # mixins declare connection and session as plain attributes
    AuditLog,
    PolicyVersionsMixin,
    ExpiryMixin,
    RunsMixin,
    RegistryMixin,
    LeasesMixin,
    GrantsMixin,
    OperatorsMixin,
    SemanticCacheMixin,
    WebhooksMixin,
    IdsMixin,
):
    """One open transaction on the ledger; created by :class:`Repository` only."""

    # proposals ---------------------------------------------------------------------------
    def proposal(self, proposal_id: str) -> Proposal | None:
        """The proposal with that id, if any."""
        row = self._hot(_SELECT_PROPOSAL, {"w_id": proposal_id}).first()
        return proposal_from_row(row) if row else None

    def proposals_by_id(self, proposal_ids: Collection[str]) -> dict[str, Proposal]:
        """The proposals with these ids that exist, by id (one statement per 500 ids)."""
        ids = list(dict.fromkeys(proposal_ids))
        statement = _SELECT_PROPOSALS_PG if self.dialect == "postgresql" else _SELECT_PROPOSALS
        found: dict[str, Proposal] = {}
        for start in range(0, len(ids), _IDS_PER_STATEMENT):
            chunk = ids[start : start + _IDS_PER_STATEMENT]
            for row in self._hot(statement, {"w_ids": chunk}).all():
                proposal = proposal_from_row(row)
                found[proposal.proposal_id] = proposal
        return found

    def proposal_for_write(
        self, proposal_id: str, *, trail: bool = False
    ) -> tuple[Proposal, Execution | None] | None:
        """The proposal with that id and its execution, if any, in one statement.

        Also reads the audit chain tip for :meth:`append_audit`; call it inside a write
        transaction (where writers are serialised), not a read.

        Args:
            trail: Also read the proposal's audit records, which :meth:`audit_of` then returns
                until this transaction appends one (on PostgreSQL in the same round trip).
        """
        late = self.reads_before_lock
        statement = _SELECT_FOR_LATE_WRITE if late else _SELECT_FOR_WRITE
        if trail and self.dialect == "postgresql":
            found, records = self._hot_together(
                [(statement, {"w_id": proposal_id}),
                 (SELECT_SUBJECT_AUDIT, {"w_subject": proposal_id})],
                before_lock=late,
            )  # fmt: skip
            self._trail = (proposal_id, [audit_from_row(record) for record in records])
            row = found.first()
        elif late and self._prefetched is not None and proposal_id in self._prefetched:
            row = self._prefetched.pop(proposal_id)
        elif late:
            row = self._hot_before_lock(statement, {"w_id": proposal_id}).first()
        else:
            row = self._hot(statement, {"w_id": proposal_id}).first()
        if row is None:
            return None
        if late:
            # Read before the lock: the guard checks the proposal's records (a trail read in
            # the same round trip that is newer than the row fails it too) and, if the policy
            # is used (``policy_in_force``), the policy's.
            if self.reads_before_lock:
                self._guard(proposal_id, int(row.subject_seq))
                self._policy_seq_read = int(row.policy_seq)
        else:
            self._keep_tip(row)
        self._keep_policy_in_force(row)
        return proposal_from_row(row), joined_execution(row)

    def prefetch_for_late_write(self, proposal_ids: Sequence[str]) -> None:
        """PostgreSQL, before a late lock: read what :meth:`proposal_for_write` (without the
        trail) will read for each of these proposals, all in one round trip; each is then
        guarded as it is taken, and what is not taken before the lock is dropped.

        One statement per proposal, the same one :meth:`proposal_for_write` runs, rather than
        one for all of them (``id = ANY(...)``): that one's plan, made once per connection for
        any number of ids, joined the whole execution table (a hash join) on a grown ledger.
        """
        ids = list(dict.fromkeys(proposal_ids))
        if len(ids) < 2 or self.dialect != "postgresql" or not self.reads_before_lock:
            return
        results = self._hot_together(
            [(_SELECT_FOR_LATE_WRITE, {"w_id": proposal_id}) for proposal_id in ids],
            before_lock=True,
        )
        rows = [row for result in results for row in result.all()]
        self._prefetched = dict.fromkeys(ids) | {row.id: row for row in rows}

    _prefetched: dict[str, Any] | None = None
    """Rows read by :meth:`prefetch_for_late_write` and not taken yet (``None``: not found)."""

    def _keep_tip(self, row: Any) -> None:
        """Take the chain tip read with :data:`_TIP_COLUMNS` (unless one is held already)."""
        if self._tip is None:
            seq = row.tip_seq
            self._tip = (int(seq), str(row.tip_hash)) if seq is not None else (0, GENESIS_HASH)

    def policy_in_force(self) -> PolicyInForce:
        """The policy in force (see :class:`PolicyVersionsMixin`); read first in a transaction,
        it brings the audit chain tip for :meth:`append_audit` in the same statement, as
        :meth:`proposal_for_write` does (one round trip fewer while a propose holds the lock).
        """
        if self._policy_seq_read is not None:  # read before a late lock: guard it
            self._guard(POLICY_SUBJECT, self._policy_seq_read)
            self._policy_seq_read = None
        if not self._policy_known() and (self._tip is None or self.reads_before_lock):
            self._read_policy_in_force(late=self.reads_before_lock)
        return super().policy_in_force()

    def _read_policy_in_force(self, *, late: bool) -> None:
        """A call's first read: the policy in force, and whether the tool has a live grant if
        asked (:meth:`probe_grants`). With the chain tip, under the lock; or, ``late``, before
        a late lock, guarded: the policy's newest record, and the absence of live grants the
        call is then decided on."""
        probe = self._grant_probe
        params = None if probe is None else {"probe_tool": probe[0], "probe_at": probe[1]}
        if late:
            statement = _IN_FORCE_LATE if probe is None else _IN_FORCE_AND_GRANT_LATE
            row = self._hot_before_lock(statement, params).one()
        else:
            statement = _IN_FORCE_AND_TIP if probe is None else _IN_FORCE_TIP_AND_GRANT
            row = self._hot(statement, params).one()
        if params is not None:
            live = bool(row.live_grant)
            self._keep_grant_probe(live)
            if late and not live:  # decided without reading grants: none may appear meanwhile
                self._guard_with(NO_LIVE_GRANT_GUARD, params)
        if late:
            self._guard(POLICY_SUBJECT, int(row.policy_seq))
        else:
            self._keep_tip(row)
        self._keep_policy_in_force(row)

    _policy_seq_read: int | None = None
    """The policy's newest audit seq, read before a late lock; unguarded until the policy in
    force is used."""

    def _forget_unguarded(self) -> None:
        self._prefetched = None
        if self._policy_seq_read is not None:  # read before the lock, never used: read again
            self._policy_seq_read = None
            self._forget_policy_in_force()

    def proposals_with_executions(
        self, after_id: str = "", limit: int = 1000
    ) -> list[tuple[Proposal, Execution | None]]:
        """Proposals with ids after ``after_id`` (ascending) and their executions, if any."""
        rows = self._execute(_SELECT_WITH_EXECUTIONS, {"w_after": after_id, "w_limit": limit})
        return [(proposal_from_row(row), joined_execution(row)) for row in rows]

    def insert_proposal(self, proposal: Proposal) -> None:
        """Insert a new proposal and its domain index rows."""
        self._hot(_INSERT_PROPOSAL, proposal_to_values(proposal), insert=True, send=True)
        opened = open_values(proposal)
        if opened is not None:
            self._hot(_INSERT_OPEN, opened, insert=True, send=True)
        if proposal.domains:
            for row in domain_values(proposal):
                self._hot(_INSERT_DOMAIN, row, insert=True, send=True)

    def update_proposal(
        self,
        proposal_id: str,
        *,
        expect_status: ProposalStatus,
        values: dict[str, Any],
        expires_after: datetime | None = None,
        expect_expires_at: datetime | None = None,
        expect_args_hash: str | None = None,
    ) -> int:
        """One conditional UPDATE; returns the rowcount (0 when the condition did not hold; in
        a :meth:`pipelined` block it must be 1)."""
        statement, params = self._proposal_update(
            proposal_id, expect_status, values, expires_after, expect_expires_at,
            expect_args_hash, returning=False,
        )  # fmt: skip
        rowcount = self._hot(statement, params, send=True, expect=1).rowcount
        if rowcount != 0:  # 1, or -1 in a pipeline, where a miss fails the whole transaction
            self._keep_open_set(proposal_id, values)
        return rowcount

    def update_proposal_returning(
        self,
        proposal_id: str,
        *,
        expect_status: ProposalStatus,
        values: dict[str, Any],
        expires_after: datetime | None = None,
        expect_args_hash: str | None = None,
    ) -> Proposal | None:
        """One conditional UPDATE ... RETURNING; the updated proposal, ``None`` if no row matched.

        The primary key condition matches at most one row, so "a row came back" is exactly
        "rowcount == 1".
        """
        statement, params = self._proposal_update(
            proposal_id, expect_status, values, expires_after, None, expect_args_hash,
            returning=True,
        )  # fmt: skip
        rows = self._hot(statement, params).all()
        if len(rows) != 1:
            return None
        self._keep_open_set(proposal_id, values)
        return proposal_from_row(rows[0])

    def _keep_open_set(self, proposal_id: str, values: dict[str, Any]) -> None:
        """After an UPDATE of an open proposal that matched: remove it from the open set when
        ``values`` make it terminal, or move its expiry there."""
        status = values.get("status")
        if status is not None and ProposalStatus(status).terminal:
            self._hot(_CLOSE_OPEN, {"w_id": proposal_id}, send=True)
        elif "expires_at" in values:
            params = {"w_id": proposal_id, "v_expires_at": values["expires_at"]}
            self._hot(_MOVE_OPEN, params, send=True)

    def update_proposal_from(
        self, current: Proposal, *, expect_status: ProposalStatus, values: dict[str, Any]
    ) -> Proposal | None:
        """One conditional UPDATE of ``current``'s row; ``current`` with ``values`` when it
        matched, ``None`` if not.

        ``current`` must have been read in this write transaction: audited writers are
        serialised (and every proposal write is audited), so the updated row is ``current``
        plus ``values``, without reading it back.
        """
        if (
            self.update_proposal(current.proposal_id, expect_status=expect_status, values=values)
            != 1
        ):
            return None
        if "status" in values:
            values = {**values, "status": ProposalStatus(values["status"])}
        return current.model_copy(update=values)

    @staticmethod
    def _proposal_update(
        proposal_id: str,
        expect_status: ProposalStatus,
        values: dict[str, Any],
        expires_after: datetime | None,
        expect_expires_at: datetime | None,
        expect_args_hash: str | None,
        *,
        returning: bool,
    ) -> tuple[Any, dict[str, Any]]:
        columns = proposal_columns(values)
        statement = _update_proposal_statement(
            tuple(columns), expires_after is not None, expect_expires_at is not None,
            expect_args_hash is not None, returning,
        )  # fmt: skip
        params = {f"v_{name}": value for name, value in columns.items()}
        params["w_id"] = proposal_id
        params["w_status"] = expect_status.value
        if expires_after is not None:
            params["w_expires_after"] = expires_after
        if expect_expires_at is not None:
            params["w_expires_at"] = expect_expires_at
        if expect_args_hash is not None:
            params["w_args_hash"] = expect_args_hash
        return statement, params

    def list_proposals(
        self,
        *,
        statuses: Sequence[ProposalStatus] = (),
        owner: str | None = None,
        thread_id: str | None = None,
        tool_name: str | None = None,
        domain: str | None = None,
        runtime: str | None = None,
        after: tuple[datetime, str] | None = None,
        newest_first: bool = False,
        limit: int = 50,
    ) -> list[Proposal]:
        """Proposals matching every given filter, in (created_at, id) order after ``after``.

        Statuses that are all open (not terminal) are looked up in ``proposal_open``, in its
        (created_at, id) order; the proposal table has no index on status.
        """
        table = _PROPOSAL.c
        wanted = [s.value for s in statuses]
        created_at, ident = table.created_at, table.id
        if statuses and not any(s.terminal for s in statuses):
            query = (
                sa.select(_PROPOSAL)
                .select_from(_OPEN.join(_PROPOSAL, table.id == _OPEN.c.proposal_id))
                .where(table.status.in_(wanted))
            )
            created_at, ident = _OPEN.c.created_at, _OPEN.c.proposal_id
        else:
            query = sa.select(_PROPOSAL)
            if statuses:
                query = query.where(table.status.in_(wanted))
        if owner is not None:
            query = query.where(table.owner == owner)
        if thread_id is not None:
            query = query.where(table.thread_id == thread_id)
        if tool_name is not None:
            query = query.where(table.tool_name == tool_name)
        if runtime is not None:
            query = query.where(table.runtime == runtime)
        if domain is not None:
            query = query.where(
                sa.exists().where(_DOMAIN.c.proposal_id == table.id, _DOMAIN.c.domain == domain)
            )
        key = sa.tuple_(created_at, ident)
        if after is not None:
            bound = sa.tuple_(sa.literal(after[0], type_=created_at.type), sa.literal(after[1]))
            query = query.where(key < bound if newest_first else key > bound)
        if newest_first:
            query = query.order_by(created_at.desc(), ident.desc())
        else:
            query = query.order_by(created_at, ident)
        return [proposal_from_row(row) for row in self._execute(query.limit(limit))]

    def proposals_terminal_before(
        self, statuses: Sequence[ProposalStatus], before: datetime, limit: int
    ) -> list[Proposal]:
        """Proposals in ``statuses`` last changed before ``before``, oldest made first.

        No index holds ``status`` or ``updated_at`` (a decision changes them), so the scan walks
        ``ix_proposal_created`` up to ``before``: a proposal last changed before then was made
        before then too. (One whose change was stamped by a host whose clock ran behind the
        maker's waits for a later cut-off.)
        """
        query = (
            select(ProposalRow)
            .where(col(ProposalRow.created_at) < before)
            .where(col(ProposalRow.status).in_([s.value for s in statuses]))
            .where(col(ProposalRow.updated_at) < before)
            .order_by(col(ProposalRow.created_at), col(ProposalRow.id))
            .limit(limit)
        )
        return [proposal_from_row(row) for row in self.session.exec(query).all()]

    def delete_proposals(self, proposal_ids: Sequence[str]) -> int:
        """Delete proposals with their executions and domain rows."""
        if not proposal_ids:
            return 0
        ids = list(proposal_ids)
        self._execute(sa.delete(_EXECUTION).where(_EXECUTION.c.proposal_id.in_(ids)))
        self._execute(sa.delete(_DOMAIN).where(_DOMAIN.c.proposal_id.in_(ids)))
        self._execute(sa.delete(_OPEN).where(_OPEN.c.proposal_id.in_(ids)))
        self.delete_waiters(ids)
        return self._execute(sa.delete(_PROPOSAL).where(_PROPOSAL.c.id.in_(ids))).rowcount

    # executions --------------------------------------------------------------------------
    def execution(self, proposal_id: str) -> Execution | None:
        """The execution record of a claimed proposal, if any."""
        row = self._hot(_SELECT_EXECUTION, {"w_proposal_id": proposal_id}).first()
        return execution_from_row(row) if row else None

    def insert_execution(
        self, proposal_id: str, executor: ExecutorIdentity, args_hash: str, started_at: datetime
    ) -> Execution:
        """Write the execution record ahead of the side effect (``proposal_id`` is unique).

        Returns:
            The stored execution (what was written: the table sets no value of its own that
            the model carries).
        """
        started_at = started_at.astimezone(UTC)
        values = execution_start_values(proposal_id, executor, args_hash, started_at)
        self._hot(_INSERT_EXECUTION, values, insert=True, send=True)
        return Execution(
            proposal_id=proposal_id, state="executing", executor=executor, args_hash=args_hash,
            started_at=started_at,
        )  # fmt: skip

    def update_execution(self, proposal_id: str, *, expect_state: str, **values: Any) -> int:
        """Conditional UPDATE of an execution's state; returns the rowcount (in a
        :meth:`pipelined` block it must be 1)."""
        statement = _update_execution_statement(tuple(values))
        params = {f"v_{name}": value for name, value in values.items()}
        params["w_proposal_id"] = proposal_id
        params["w_state"] = expect_state
        return self._hot(statement, params, send=True, expect=1).rowcount

    def update_execution_from(
        self, current: Execution, *, expect_state: str, **values: Any
    ) -> Execution | None:
        """:meth:`update_execution` of ``current``'s row; ``current`` with ``values`` when it
        matched, ``None`` if not (``current`` read in this write transaction, as for
        :meth:`update_proposal_from`)."""
        if self.update_execution(current.proposal_id, expect_state=expect_state, **values) != 1:
            return None
        return current.model_copy(update=values)

    def executions_in_state(self, state: str, limit: int = 1000) -> list[Execution]:
        """Executions currently in ``state``."""
        query = select(ExecutionRow).where(ExecutionRow.state == state).limit(limit)
        return [execution_from_row(row) for row in self.session.exec(query).all()]


class Repository:
    """Opens transactions on one ledger engine and hands out :class:`LedgerTx` objects.

    Args:
        engine: A ledger engine whose schema is current (see ``supervisor.store.migrate``).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name

    def write(
        self, *, audited: bool = True, late_lock: bool = False
    ) -> AbstractContextManager[LedgerTx]:
        """A write transaction, committed on success and rolled back on any error.

        Args:
            audited: Take the cross-process audit lock (PostgreSQL) so the chain can be
                appended; SQLite serialises every writer anyway.
            late_lock: PostgreSQL, an audited write: take the lock only with the write's first
                statement that is not a guarded read, and chain its audit records on the
                server (see ``TransactionBase``'s ``late``). The write raises
                :class:`RowsNotMatched` if what it read before the lock changed: the caller
                runs it again without ``late_lock``.

        Raises:
            LedgerBusy: The write lock stayed taken past the busy timeout.
            LedgerUnavailable: The database cannot be reached or written.
        """
        if self.dialect == "sqlite":
            return self._sqlite_transaction("BEGIN IMMEDIATE", flush=True)
        return self._write(audited, late_lock)

    @contextmanager
    def _sqlite_transaction(self, begin: str, *, flush: bool) -> Iterator[LedgerTx]:
        """A SQLite transaction begun and ended on the driver connection (``DriverTransaction``);
        ``flush``: an ORM session opened in it is flushed before the commit."""
        with translate_errors():
            transaction = DriverTransaction(self.engine, begin)
            try:
                tx = LedgerTx(None, "sqlite", driver=transaction.driver,
                              join=transaction.connection)  # fmt: skip
                try:
                    yield tx
                    tx._close(flush=flush)
                except BaseException:
                    try:
                        tx._close(flush=False)
                    finally:
                        transaction.rollback()
                    raise
                transaction.commit()
            finally:
                transaction.close()

    @contextmanager
    def _write(self, audited: bool, late_lock: bool) -> Iterator[LedgerTx]:
        with translate_errors(), self.engine.connect() as connection:
            connection = connection.execution_options(**{WRITE_OPTION: True})
            with connection.begin():
                # The chain lock is taken with the transaction's first statement (late: its
                # first statement that is not a guarded read).
                lock = audited and self.dialect == "postgresql"
                tx = LedgerTx(connection, self.dialect, lock=lock, late=late_lock)
                try:
                    yield tx
                except BaseException:
                    tx._close(flush=False)
                    raise
                tx._close(flush=True)
                if self.dialect == "postgresql" and tx.traced:
                    connection.execute(_NOTIFY, {"channel": TRACE_CHANNEL, "seq": ""})

    def read(self, *, snapshot: bool = False) -> AbstractContextManager[LedgerTx]:
        """A read-only transaction (a consistent snapshot on SQLite WAL).

        Args:
            snapshot: On PostgreSQL, read every statement from one snapshot (``REPEATABLE
                READ``) instead of each statement's own; SQLite reads always do. Without it a
                PostgreSQL read runs in autocommit: each statement already reads its own
                snapshot, so a transaction around them would add only its ``BEGIN`` and
                ``COMMIT`` round trips.
        """
        if self.dialect == "sqlite":
            return self._sqlite_transaction("BEGIN", flush=False)
        return self._read(snapshot)

    @contextmanager
    def _read(self, snapshot: bool) -> Iterator[LedgerTx]:
        with translate_errors(), self.engine.connect() as connection:
            if self.dialect == "postgresql":
                level = "REPEATABLE READ" if snapshot else "AUTOCOMMIT"
                connection = connection.execution_options(isolation_level=level)
            with connection.begin():
                tx = LedgerTx(connection, self.dialect)
                try:
                    yield tx
                finally:
                    tx._close(flush=False)

    def change_probe(self, channels: str | Collection[str] = ALL_CHANNELS) -> ChangeProbe:
        """A dedicated connection that tells when other connections committed.

        Args:
            channels: On PostgreSQL, what to listen for: every audited write
                (:data:`ALL_CHANNELS`, the default), some actions' (:func:`channels_for`), or
                trace appends (:data:`TRACE_CHANNEL`). SQLite's probe sees every commit either
                way.
        """
        from supervisor.store.relay import open_probe  # sockets: only once something follows

        with translate_errors():
            return open_probe(self.engine, channels)
