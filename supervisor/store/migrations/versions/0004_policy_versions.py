"""Versions of the ledger's approval policy (enforced by every process that opens the ledger).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 4


def upgrade() -> None:
    op.create_table(
        "policy_version",
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("document_json", sa.Text(), nullable=False),
        sa.Column("document_hash", sa.String(64), nullable=False),
        sa.Column("applied_by", sa.String(255), nullable=False),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("audit_seq", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("version"),
    )
    op.execute(
        sa.text("UPDATE ledger_meta SET value = :version WHERE key = 'schema_version'").bindparams(
            version=str(SCHEMA_VERSION)
        )
    )


def downgrade() -> None:
    op.drop_table("policy_version")
    op.execute(sa.text("UPDATE ledger_meta SET value = '3' WHERE key = 'schema_version'"))
