"""The first ledger schema: every table of DESIGN §3.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SCHEMA_VERSION = 1


def _ts(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _str(name: str, length: int, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.String(length), nullable=nullable)


def _text(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.Text(), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "proposal",
        _str("id", 64),
        _str("tool_name", 200),
        _str("tool_schema_hash", 64),
        _text("arguments_json"),
        _str("args_hash", 64),
        _text("target_json"),
        _text("policy_reason"),
        _str("owner", 200),
        _str("user_id", 200, nullable=True),
        _str("thread_id", 200, nullable=True),
        _str("checkpoint_id", 64, nullable=True),
        _str("call_id", 200, nullable=True),
        _text("domains_json"),
        _str("risk", 50, nullable=True),
        _str("status", 32),
        _ts("created_at"),
        _ts("updated_at"),
        _ts("expires_at"),
        _ts("decided_at", nullable=True),
        _str("approver_id", 200, nullable=True),
        _text("approver_context_json", nullable=True),
        _text("decision_reason", nullable=True),
        _str("supersedes_id", 64, nullable=True),
        _str("superseded_by_id", 64, nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_proposal_status_created", "proposal", ["status", "created_at", "id"])
    op.create_index("ix_proposal_created", "proposal", ["created_at", "id"])
    op.create_index("ix_proposal_owner", "proposal", ["owner", "created_at", "id"])
    op.create_index("ix_proposal_thread", "proposal", ["thread_id", "created_at", "id"])
    op.create_index("ix_proposal_tool", "proposal", ["tool_name", "created_at", "id"])
    op.create_index("ix_proposal_status_expires", "proposal", ["status", "expires_at"])
    op.create_index("ix_proposal_status_updated", "proposal", ["status", "updated_at"])

    op.create_table(
        "proposal_domain",
        _str("proposal_id", 64),
        _str("domain", 200),
        sa.ForeignKeyConstraint(["proposal_id"], ["proposal.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("proposal_id", "domain"),
    )
    op.create_index("ix_proposal_domain_domain", "proposal_domain", ["domain", "proposal_id"])

    op.create_table(
        "execution",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        _str("proposal_id", 64),
        _str("state", 32),
        _str("executor_id", 200),
        sa.Column("executor_pid", sa.Integer(), nullable=False),
        _str("executor_host", 255),
        _str("args_hash", 64),
        _ts("started_at"),
        _ts("finished_at", nullable=True),
        _str("outcome_status", 50, nullable=True),
        _text("result_ref", nullable=True),
        _text("reason", nullable=True),
        sa.ForeignKeyConstraint(["proposal_id"], ["proposal.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("proposal_id"),
    )
    op.create_index("ix_execution_state", "execution", ["state"])

    op.create_table(
        "checkpoint",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        _str("id", 64),
        _str("agent_id", 200),
        _str("thread_id", 200),
        _text("messages_json"),
        _text("pending_tool_calls_json"),
        _text("state_json"),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        _ts("created_at"),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index("ix_checkpoint_agent_thread", "checkpoint", ["agent_id", "thread_id", "seq"])

    op.create_table(
        "audit",
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        _ts("at"),
        _str("actor", 200),
        _str("action", 64),
        _str("subject", 200),
        _text("payload_json"),
        _str("prev_hash", 64),
        _str("hash", 64),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index("ix_audit_subject", "audit", ["subject", "seq"])

    op.create_table(
        "trace_event",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        _ts("at"),
        _str("agent_id", 200, nullable=True),
        _str("thread_id", 200, nullable=True),
        _str("run_id", 200, nullable=True),
        _str("kind", 50),
        _str("tool", 200, nullable=True),
        _str("outcome_status", 50, nullable=True),
        _str("reason_code", 200, nullable=True),
        _text("payload_json"),
        _str("blob_ref", 64, nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_trace_agent_thread", "trace_event", ["agent_id", "thread_id", "id"])
    op.create_index("ix_trace_run", "trace_event", ["run_id", "id"])

    op.create_table(
        "blob",
        _str("sha256", 64),
        sa.Column("size", sa.BigInteger(), nullable=False),
        _str("media_type", 200),
        _text("preview"),
        sa.Column("content", sa.LargeBinary(), nullable=True),
        _text("file_path", nullable=True),
        _ts("created_at"),
        sa.PrimaryKeyConstraint("sha256"),
    )

    op.create_table(
        "tool_registry",
        _str("handle", 200),
        _str("agent_id", 200),
        _str("name", 200),
        _text("import_ref", nullable=True),
        _text("description"),
        _text("tool_schema_json"),
        _str("schema_hash", 64),
        _text("domains_json"),
        _text("flags_json"),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("handle"),
    )
    op.create_index("ix_tool_registry_agent_name", "tool_registry", ["agent_id", "name"])

    op.create_table(
        "agent",
        _str("id", 200),
        _str("name", 200),
        _text("config_json"),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("id"),
    )

    op.create_table(
        "process",
        _str("id", 64),
        _str("kind", 50),
        sa.Column("pid", sa.Integer(), nullable=True),
        _str("host", 255),
        _text("command"),
        _str("status", 32),
        _ts("started_at"),
        _ts("heartbeat_at"),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_process_status", "process", ["status", "heartbeat_at"])

    meta = op.create_table(
        "ledger_meta",
        _str("key", 100),
        _text("value"),
        sa.PrimaryKeyConstraint("key"),
    )
    op.bulk_insert(meta, [{"key": "schema_version", "value": str(SCHEMA_VERSION)}])


def downgrade() -> None:
    for table in (
        "ledger_meta",
        "process",
        "agent",
        "tool_registry",
        "blob",
        "trace_event",
        "audit",
        "checkpoint",
        "execution",
        "proposal_domain",
        "proposal",
    ):
        op.drop_table(table)
