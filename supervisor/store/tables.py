"""SQLModel table classes: the ledger's storage shape (DESIGN §3).

These classes never leave ``supervisor.store``; the repository converts them to the pydantic
models in :mod:`supervisor.ledger.models`. JSON that is hashed or compared is stored as canonical
JSON text so both engines keep it byte-for-byte. Every datetime is stored in UTC and read back
tz-aware (SQLite drops the offset, :class:`UTCDateTime` restores it).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlmodel import Field, SQLModel

from supervisor.ledger.models import APPROVER_ID_MAX

SCHEMA_VERSION = 11
"""The schema version this code writes; ``ledger_meta`` stores the ledger's own."""


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A datetime column that only accepts tz-aware values and always returns UTC."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("The ledger stores only timezone-aware datetimes.")
        utc_value = value.astimezone(UTC)
        return utc_value.replace(tzinfo=None) if dialect.name == "sqlite" else utc_value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class LedgerTable(SQLModel):
    """The base of every ledger table class: pydantic's validator for a table is never built.

    Table rows are made by SQLAlchemy when read and by keyword (without validation) when
    written; the domain models in :mod:`supervisor.ledger.models` are what validates. So the
    core schema and validator pydantic would build for each of the 20 table classes at import
    (~12 ms of a console's start) are deferred, and nothing in the ledger ever asks for them.
    A deferred build is not thread-safe in pydantic, so that must stay true: the test suite
    checks at its end that no table class's validator was built (``tests/conftest.py``).
    """

    model_config = {"defer_build": True}


def _ts(**kwargs: Any) -> Any:
    return Field(sa_type=UTCDateTime, **kwargs)


class ProposalRow(LedgerTable, table=True):
    __tablename__ = "proposal"
    # No index holds a column that a decision changes (status, updated_at, decided_at, ...):
    # on PostgreSQL a status UPDATE then rewrites the row in place (HOT) instead of inserting
    # into every index, and it is made under the audit chain's lock. What status queries need
    # is in ``proposal_open``.
    __table_args__ = (
        sa.Index("ix_proposal_created", "created_at", "id"),
        sa.Index("ix_proposal_owner", "owner", "created_at", "id"),
        sa.Index("ix_proposal_thread", "thread_id", "created_at", "id"),
        sa.Index("ix_proposal_tool", "tool_name", "created_at", "id"),
        sa.Index("ix_proposal_runtime", "runtime", "created_at", "id"),
    )

    id: str = Field(primary_key=True, max_length=64)
    tool_name: str = Field(max_length=200)
    tool_schema_hash: str = Field(max_length=64)
    arguments_json: str = Field(sa_type=sa.Text)
    args_hash: str = Field(max_length=64)
    target_json: str = Field(sa_type=sa.Text, default="{}")
    policy_reason: str = Field(sa_type=sa.Text, default="")
    owner: str = Field(max_length=200, default="")
    user_id: str | None = Field(default=None, max_length=200)
    thread_id: str | None = Field(default=None, max_length=200)
    checkpoint_id: str | None = Field(default=None, max_length=64)
    call_id: str | None = Field(default=None, max_length=200)
    domains_json: str = Field(sa_type=sa.Text, default="[]")
    risk: str | None = Field(default=None, max_length=50)
    status: str = Field(max_length=32)
    created_at: datetime = _ts()
    updated_at: datetime = _ts()
    expires_at: datetime = _ts()
    decided_at: datetime | None = _ts(default=None)
    approver_id: str | None = Field(default=None, max_length=APPROVER_ID_MAX)
    approver_context_json: str | None = Field(default=None, sa_type=sa.Text)
    decision_reason: str | None = Field(default=None, sa_type=sa.Text)
    supersedes_id: str | None = Field(default=None, max_length=64)
    superseded_by_id: str | None = Field(default=None, max_length=64)
    decided_by_rule: str | None = Field(default=None, max_length=300)
    policy_version: int | None = None
    approvals_required: int = 1
    approvals_json: str = Field(sa_type=sa.Text, default="[]")
    grantable: bool = True
    runtime: str = Field(default="sdk", max_length=200, sa_column_kwargs={"server_default": "sdk"})
    turn_id: str | None = Field(default=None, max_length=200)


class ProposalOpenRow(LedgerTable, table=True):
    """One row per proposal that is not terminal (pending, approved, executing, needs
    reconciliation), with its creation time and expiry: where the inbox, the expiry sweep and
    the other status queries start (the status itself is read from ``proposal``).

    The store writes it with the proposal, in the same transaction: the row when a proposal is
    made, its expiry when that moves, its removal when the proposal becomes terminal or is
    deleted. A decision from one open status to another writes nothing here. Every query
    that starts here still reads the status from ``proposal``, so the set only narrows the
    search: a row left behind by a hand-made change of the table is never listed wrongly.
    """

    __tablename__ = "proposal_open"
    __table_args__ = (
        sa.Index("ix_proposal_open_created", "created_at", "proposal_id"),
        sa.Index("ix_proposal_open_expires", "expires_at"),
    )

    proposal_id: str = Field(primary_key=True, max_length=64)
    created_at: datetime = _ts()
    expires_at: datetime = _ts()


class ProposalDomainRow(LedgerTable, table=True):
    """One row per (proposal, domain) so the domain filter is an indexed lookup."""

    __tablename__ = "proposal_domain"
    __table_args__ = (sa.Index("ix_proposal_domain_domain", "domain", "proposal_id"),)

    proposal_id: str = Field(
        primary_key=True, max_length=64, foreign_key="proposal.id", ondelete="CASCADE"
    )
    domain: str = Field(primary_key=True, max_length=200)


class ExecutionRow(LedgerTable, table=True):
    __tablename__ = "execution"
    __table_args__ = (sa.Index("ix_execution_state", "state"),)

    id: int | None = Field(default=None, primary_key=True)
    proposal_id: str = Field(
        max_length=64, unique=True, foreign_key="proposal.id", ondelete="CASCADE"
    )
    state: str = Field(max_length=32)
    executor_id: str = Field(max_length=200)
    executor_pid: int
    executor_host: str = Field(max_length=255)
    args_hash: str = Field(max_length=64)
    started_at: datetime = _ts()
    finished_at: datetime | None = _ts(default=None)
    outcome_status: str | None = Field(default=None, max_length=50)
    result_ref: str | None = Field(default=None, sa_type=sa.Text)
    reason: str | None = Field(default=None, sa_type=sa.Text)


class CheckpointRow(LedgerTable, table=True):
    __tablename__ = "checkpoint"
    __table_args__ = (sa.Index("ix_checkpoint_agent_thread", "agent_id", "thread_id", "seq"),)

    seq: int | None = Field(default=None, primary_key=True)
    id: str = Field(max_length=64, unique=True)
    agent_id: str = Field(max_length=200)
    thread_id: str = Field(max_length=200)
    messages_json: str = Field(sa_type=sa.Text)
    pending_tool_calls_json: str = Field(sa_type=sa.Text)
    state_json: str = Field(sa_type=sa.Text, default="{}")
    schema_version: int
    created_at: datetime = _ts()


class AuditRow(LedgerTable, table=True):
    __tablename__ = "audit"
    __table_args__ = (sa.Index("ix_audit_subject", "subject", "seq"),)

    seq: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    at: datetime = _ts()
    actor: str = Field(max_length=200)
    action: str = Field(max_length=64)
    subject: str = Field(max_length=200)
    payload_json: str = Field(sa_type=sa.Text)
    prev_hash: str = Field(max_length=64)
    hash: str = Field(max_length=64)


class TraceEventRow(LedgerTable, table=True):
    __tablename__ = "trace_event"
    __table_args__ = (
        sa.Index("ix_trace_agent_thread", "agent_id", "thread_id", "id"),
        sa.Index("ix_trace_run", "run_id", "id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = _ts()
    agent_id: str | None = Field(default=None, max_length=200)
    thread_id: str | None = Field(default=None, max_length=200)
    run_id: str | None = Field(default=None, max_length=200)
    kind: str = Field(max_length=50)
    tool: str | None = Field(default=None, max_length=200)
    outcome_status: str | None = Field(default=None, max_length=50)
    reason_code: str | None = Field(default=None, max_length=200)
    payload_json: str = Field(sa_type=sa.Text, default="{}")
    blob_ref: str | None = Field(default=None, max_length=80)  # "sha256:" + 64 hex digits


class BlobRow(LedgerTable, table=True):
    __tablename__ = "blob"

    sha256: str = Field(primary_key=True, max_length=64)
    size: int = Field(sa_type=sa.BigInteger)
    media_type: str = Field(max_length=200)
    preview: str = Field(sa_type=sa.Text, default="")
    content: bytes | None = Field(default=None, sa_type=sa.LargeBinary)
    file_path: str | None = Field(default=None, sa_type=sa.Text)
    created_at: datetime = _ts()


class ToolRegistryRow(LedgerTable, table=True):
    __tablename__ = "tool_registry"
    __table_args__ = (sa.Index("ix_tool_registry_agent_name", "agent_id", "name"),)

    handle: str = Field(primary_key=True, max_length=200)
    agent_id: str = Field(max_length=200)
    name: str = Field(max_length=200)
    import_ref: str | None = Field(default=None, sa_type=sa.Text)
    description: str = Field(sa_type=sa.Text, default="")
    tool_schema_json: str = Field(sa_type=sa.Text, default="{}")
    schema_hash: str = Field(max_length=64)
    domains_json: str = Field(sa_type=sa.Text, default="[]")
    flags_json: str = Field(sa_type=sa.Text, default="{}")
    updated_at: datetime = _ts()


class AgentRow(LedgerTable, table=True):
    __tablename__ = "agent"

    id: str = Field(primary_key=True, max_length=200)
    name: str = Field(max_length=200)
    config_json: str = Field(sa_type=sa.Text, default="{}")
    updated_at: datetime = _ts()


class ProcessRow(LedgerTable, table=True):
    __tablename__ = "process"
    __table_args__ = (sa.Index("ix_process_status", "status", "heartbeat_at"),)

    id: str = Field(primary_key=True, max_length=64)
    kind: str = Field(max_length=50)
    pid: int | None = None
    host: str = Field(max_length=255)
    command: str = Field(sa_type=sa.Text, default="")
    status: str = Field(max_length=32)
    started_at: datetime = _ts()
    heartbeat_at: datetime = _ts()
    exit_code: int | None = None
    lease_expires_at: datetime | None = _ts(default=None, nullable=True)
    lost_at: datetime | None = _ts(default=None, nullable=True)
    log_path: str | None = Field(default=None, sa_type=sa.Text, nullable=True)
    step_json: str | None = Field(default=None, sa_type=sa.Text, nullable=True)


class LedgerMetaRow(LedgerTable, table=True):
    __tablename__ = "ledger_meta"

    key: str = Field(primary_key=True, max_length=100)
    value: str = Field(sa_type=sa.Text)


class PolicyVersionRow(LedgerTable, table=True):
    """One version of the ledger's approval policy; the highest version is in force."""

    __tablename__ = "policy_version"

    version: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    document_json: str = Field(sa_type=sa.Text)
    document_hash: str = Field(max_length=64)
    applied_by: str = Field(max_length=255)
    applied_at: datetime = _ts()
    reason: str | None = Field(default=None, sa_type=sa.Text)
    audit_seq: int


class GrantRow(LedgerTable, table=True):
    """A time-boxed, use-capped rule an operator made from a proposal ("allow similar")."""

    __tablename__ = "policy_grant"
    __table_args__ = (sa.Index("ix_policy_grant_tool", "tool_name", "expires_at"),)

    id: str = Field(primary_key=True, max_length=64)
    tool_name: str = Field(max_length=200)
    schema_hash: str = Field(max_length=64)
    target_hash: str = Field(max_length=64)
    owner: str = Field(max_length=200, default="")
    arguments_json: str = Field(sa_type=sa.Text)
    created_by: str = Field(max_length=255)
    approver_id: str = Field(max_length=APPROVER_ID_MAX)
    created_at: datetime = _ts()
    expires_at: datetime = _ts()
    max_uses: int
    uses: int = 0
    revoked_at: datetime | None = _ts(default=None)
    revoked_by: str | None = Field(default=None, max_length=APPROVER_ID_MAX)
    revoke_reason: str | None = Field(default=None, sa_type=sa.Text)
    source_proposal_id: str | None = Field(default=None, max_length=64)
    reason: str | None = Field(default=None, sa_type=sa.Text)
    document_hash: str = Field(max_length=64)
