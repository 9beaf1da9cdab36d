"""The repository: the only code that opens sessions on the ledger engine.

Writes go through :meth:`Repository.write`, which serialises audited writers across processes
and hosts: SQLite transactions begin with ``BEGIN IMMEDIATE``; PostgreSQL transactions take
``pg_advisory_xact_lock`` first. Inside, the chain tip is read and the next audit seq written
with no gap. On PostgreSQL a ``NOTIFY`` is queued in the same transaction, so listeners wake
exactly when the change is committed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, col, select

from supervisor.canonical import canonical_json
from supervisor.ledger.audit import GENESIS_HASH, chain_hash
from supervisor.ledger.models import (
    ApproverContext,
    AuditRecord,
    Execution,
    ExecutorIdentity,
    Proposal,
    ProposalStatus,
)
from supervisor.store.convert import audit_from_row, execution_from_row, proposal_from_row
from supervisor.store.convert import proposal_to_row as _proposal_to_row
from supervisor.store.engine import WRITE_OPTION
from supervisor.store.errors import translate_errors
from supervisor.store.notify import CHANNEL, ChangeProbe, open_probe
from supervisor.store.records import RecordsMixin
from supervisor.store.tables import (
    AuditRow,
    ExecutionRow,
    ProposalDomainRow,
    ProposalRow,
)

AUDIT_LOCK_KEY = 0x5355_5056_4155_4431  # "SUPVAUD1"
_PROPOSAL = SQLModel.metadata.tables[ProposalRow.__tablename__]
_EXECUTION = SQLModel.metadata.tables[ExecutionRow.__tablename__]
_DOMAIN = SQLModel.metadata.tables[ProposalDomainRow.__tablename__]
_AUDIT = SQLModel.metadata.tables[AuditRow.__tablename__]
_COLUMN_OF = {"proposal_id": "id", "user": "user_id"}


def _proposal_values(values: dict[str, Any]) -> dict[str, Any]:
    """Map domain field names and values to proposal columns."""
    columns: dict[str, Any] = {}
    for name, value in values.items():
        if name == "approver_context":
            context = cast(ApproverContext | None, value)
            columns["approver_context_json"] = (
                canonical_json(context.model_dump()) if context else None
            )
        elif name == "status":
            columns["status"] = ProposalStatus(value).value
        else:
            columns[_COLUMN_OF.get(name, name)] = value
    return columns


class LedgerTx(RecordsMixin):
    """One open transaction on the ledger; created by :class:`Repository` only."""

    def __init__(self, session: Session, dialect: str) -> None:
        self.session = session
        self.dialect = dialect
        self.last_audit_seq: int | None = None

    def _execute(self, statement: Any, params: Any = None) -> sa.CursorResult[Any]:
        return cast(sa.CursorResult[Any], self.session.connection().execute(statement, params))

    # proposals ---------------------------------------------------------------------------
    def proposal(self, proposal_id: str) -> Proposal | None:
        """The proposal with that id, if any."""
        row = self.session.get(ProposalRow, proposal_id)
        return proposal_from_row(row) if row else None

    def insert_proposal(self, proposal: Proposal) -> None:
        """Insert a new proposal and its domain index rows."""
        self.session.add(_proposal_to_row(proposal))
        self.session.flush()
        if proposal.domains:
            rows = [{"proposal_id": proposal.proposal_id, "domain": d} for d in proposal.domains]
            self._execute(sa.insert(_DOMAIN), rows)

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
        """One conditional UPDATE; returns the rowcount (0 when the condition did not hold)."""
        condition = [_PROPOSAL.c.id == proposal_id, _PROPOSAL.c.status == expect_status.value]
        if expires_after is not None:
            condition.append(_PROPOSAL.c.expires_at > expires_after)
        if expect_expires_at is not None:
            condition.append(_PROPOSAL.c.expires_at == expect_expires_at)
        if expect_args_hash is not None:
            condition.append(_PROPOSAL.c.args_hash == expect_args_hash)
        statement = sa.update(_PROPOSAL).where(*condition).values(**_proposal_values(values))
        return self._execute(statement).rowcount

    def list_proposals(
        self,
        *,
        statuses: Sequence[ProposalStatus] = (),
        owner: str | None = None,
        thread_id: str | None = None,
        tool_name: str | None = None,
        domain: str | None = None,
        after: tuple[datetime, str] | None = None,
        newest_first: bool = False,
        limit: int = 50,
    ) -> list[Proposal]:
        """Proposals matching every given filter, in (created_at, id) order after ``after``."""
        query = select(ProposalRow)
        if statuses:
            query = query.where(col(ProposalRow.status).in_([s.value for s in statuses]))
        if owner is not None:
            query = query.where(ProposalRow.owner == owner)
        if thread_id is not None:
            query = query.where(ProposalRow.thread_id == thread_id)
        if tool_name is not None:
            query = query.where(ProposalRow.tool_name == tool_name)
        if domain is not None:
            query = query.where(
                sa.exists().where(
                    _DOMAIN.c.proposal_id == ProposalRow.id, _DOMAIN.c.domain == domain
                )
            )
        key = sa.tuple_(col(ProposalRow.created_at), col(ProposalRow.id))
        if after is not None:
            bound = sa.tuple_(
                sa.literal(after[0], type_=_PROPOSAL.c.created_at.type), sa.literal(after[1])
            )
            query = query.where(key < bound if newest_first else key > bound)
        if newest_first:
            query = query.order_by(col(ProposalRow.created_at).desc(), col(ProposalRow.id).desc())
        else:
            query = query.order_by(col(ProposalRow.created_at), col(ProposalRow.id))
        rows = self.session.exec(query.limit(limit)).all()
        return [proposal_from_row(row) for row in rows]

    def proposals_due(self, now: datetime, limit: int) -> list[Proposal]:
        """Pending or approved proposals whose expiry has passed."""
        query = (
            select(ProposalRow)
            .where(col(ProposalRow.status).in_(["pending", "approved"]))
            .where(col(ProposalRow.expires_at) <= now)
            .order_by(col(ProposalRow.expires_at), col(ProposalRow.id))
            .limit(limit)
        )
        return [proposal_from_row(row) for row in self.session.exec(query).all()]

    def proposals_terminal_before(
        self, statuses: Sequence[ProposalStatus], before: datetime, limit: int
    ) -> list[Proposal]:
        """Proposals in ``statuses`` last changed before ``before``."""
        query = (
            select(ProposalRow)
            .where(col(ProposalRow.status).in_([s.value for s in statuses]))
            .where(col(ProposalRow.updated_at) < before)
            .order_by(col(ProposalRow.updated_at), col(ProposalRow.id))
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
        return self._execute(sa.delete(_PROPOSAL).where(_PROPOSAL.c.id.in_(ids))).rowcount

    # executions --------------------------------------------------------------------------
    def execution(self, proposal_id: str) -> Execution | None:
        """The execution record of a claimed proposal, if any."""
        row = self.session.exec(
            select(ExecutionRow).where(ExecutionRow.proposal_id == proposal_id)
        ).first()
        return execution_from_row(row) if row else None

    def insert_execution(
        self, proposal_id: str, executor: ExecutorIdentity, args_hash: str, started_at: datetime
    ) -> None:
        """Write the execution record ahead of the side effect (``proposal_id`` is unique)."""
        self._execute(
            sa.insert(_EXECUTION).values(
                proposal_id=proposal_id,
                state="executing",
                executor_id=executor.executor_id,
                executor_pid=executor.pid,
                executor_host=executor.host,
                args_hash=args_hash,
                started_at=started_at,
            )
        )

    def update_execution(self, proposal_id: str, *, expect_state: str, **values: Any) -> int:
        """Conditional UPDATE of an execution's state; returns the rowcount."""
        statement = (
            sa.update(_EXECUTION)
            .where(_EXECUTION.c.proposal_id == proposal_id, _EXECUTION.c.state == expect_state)
            .values(**values)
        )
        return self._execute(statement).rowcount

    def executions_in_state(self, state: str, limit: int = 1000) -> list[Execution]:
        """Executions currently in ``state``."""
        query = select(ExecutionRow).where(ExecutionRow.state == state).limit(limit)
        return [execution_from_row(row) for row in self.session.exec(query).all()]

    # audit -------------------------------------------------------------------------------
    def append_audit(
        self, *, at: datetime, actor: str, action: str, subject: str, payload: dict[str, Any]
    ) -> AuditRecord:
        """Append one chained audit record (callers hold the write lock)."""
        tip = self.session.exec(
            select(AuditRow.seq, AuditRow.hash).order_by(col(AuditRow.seq).desc()).limit(1)
        ).first()
        seq, prev_hash = (tip[0] + 1, tip[1]) if tip else (1, GENESIS_HASH)
        payload_json = canonical_json(payload)
        record_hash = chain_hash(
            seq=seq, at=at, actor=actor, action=action, subject=subject,
            payload=payload, prev_hash=prev_hash,
        )  # fmt: skip
        self._execute(
            sa.insert(_AUDIT).values(
                seq=seq, at=at, actor=actor, action=action, subject=subject,
                payload_json=payload_json, prev_hash=prev_hash, hash=record_hash,
            )
        )  # fmt: skip
        self.last_audit_seq = seq
        return AuditRecord(
            seq=seq, at=at, actor=actor, action=action, subject=subject,
            payload=payload, prev_hash=prev_hash, hash=record_hash,
        )  # fmt: skip

    def audit_after(self, seq: int, limit: int = 500) -> list[AuditRecord]:
        """Audit records with seq greater than ``seq``, ascending."""
        query = select(AuditRow).where(AuditRow.seq > seq).order_by(col(AuditRow.seq)).limit(limit)
        return [audit_from_row(row) for row in self.session.exec(query).all()]

    def audit_tip(self) -> int:
        """The highest audit seq (0 for an empty log)."""
        value = self.session.exec(select(sa.func.max(AuditRow.seq))).one()
        return int(value or 0)


class Repository:
    """Opens transactions on one ledger engine and hands out :class:`LedgerTx` objects.

    Args:
        engine: A ledger engine whose schema is current (see ``supervisor.store.migrate``).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name

    @contextmanager
    def write(self, *, audited: bool = True) -> Iterator[LedgerTx]:
        """A write transaction, committed on success and rolled back on any error.

        Args:
            audited: Take the cross-process audit lock (PostgreSQL) so the chain can be
                appended; SQLite serialises every writer anyway.

        Raises:
            LedgerBusy: The write lock stayed taken past the busy timeout.
            LedgerUnavailable: The database cannot be reached or written.
        """
        with translate_errors(), self.engine.connect() as connection:
            connection = connection.execution_options(**{WRITE_OPTION: True})
            with connection.begin():
                if audited and self.dialect == "postgresql":
                    connection.execute(
                        sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": AUDIT_LOCK_KEY}
                    )
                with Session(bind=connection) as session:
                    tx = LedgerTx(session, self.dialect)
                    yield tx
                    session.flush()
                    if tx.last_audit_seq is not None and self.dialect == "postgresql":
                        connection.execute(
                            sa.text("SELECT pg_notify(:channel, :seq)"),
                            {"channel": CHANNEL, "seq": str(tx.last_audit_seq)},
                        )

    @contextmanager
    def read(self) -> Iterator[LedgerTx]:
        """A read-only transaction (a consistent snapshot on SQLite WAL)."""
        with translate_errors(), self.engine.connect() as connection:
            with connection.begin(), Session(bind=connection) as session:
                yield LedgerTx(session, self.dialect)

    def change_probe(self) -> ChangeProbe:
        """A dedicated connection that tells when other connections committed."""
        with translate_errors():
            return open_probe(self.engine)
