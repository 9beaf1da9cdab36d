"""Policy rules and grants: who decided a proposal when no person did, quorum votes, grants.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 6


def upgrade() -> None:
    with op.batch_alter_table("proposal") as batch:
        batch.add_column(sa.Column("decided_by_rule", sa.String(300), nullable=True))
        batch.add_column(sa.Column("policy_version", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column("approvals_required", sa.Integer(), nullable=False, server_default="1")
        )
        batch.add_column(
            sa.Column("approvals_json", sa.Text(), nullable=False, server_default="[]")
        )
        batch.add_column(
            sa.Column("grantable", sa.Boolean(), nullable=False, server_default=sa.true())
        )
    op.create_table(
        "policy_grant",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("tool_name", sa.String(200), nullable=False),
        sa.Column("schema_hash", sa.String(64), nullable=False),
        sa.Column("target_hash", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("arguments_json", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(255), nullable=False),
        sa.Column("approver_id", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("max_uses", sa.Integer(), nullable=False),
        sa.Column("uses", sa.Integer(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.String(200), nullable=True),
        sa.Column("revoke_reason", sa.Text(), nullable=True),
        sa.Column("source_proposal_id", sa.String(64), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("document_hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_policy_grant_tool", "policy_grant", ["tool_name", "expires_at"])
    op.execute(
        sa.text("UPDATE ledger_meta SET value = :version WHERE key = 'schema_version'").bindparams(
            version=str(SCHEMA_VERSION)
        )
    )


def downgrade() -> None:
    op.drop_index("ix_policy_grant_tool", table_name="policy_grant")
    op.drop_table("policy_grant")
    with op.batch_alter_table("proposal") as batch:
        batch.drop_column("grantable")
        batch.drop_column("approvals_json")
        batch.drop_column("approvals_required")
        batch.drop_column("policy_version")
        batch.drop_column("decided_by_rule")
    op.execute(sa.text("UPDATE ledger_meta SET value = '5' WHERE key = 'schema_version'"))
