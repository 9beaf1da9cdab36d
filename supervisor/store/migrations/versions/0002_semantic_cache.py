"""The semantic cache table.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 2


def upgrade() -> None:
    op.create_table(
        "semantic_cache",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("agent_id", sa.String(200), nullable=False),
        sa.Column("tools_hash", sa.String(64), nullable=False),
        sa.Column("query_norm", sa.Text(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("embedding_json", sa.Text(), nullable=True),
        sa.Column("hits", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_hit_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_semantic_cache_agent", "semantic_cache", ["agent_id", "created_at"])
    op.execute(
        sa.text("UPDATE ledger_meta SET value = :version WHERE key = 'schema_version'").bindparams(
            version=str(SCHEMA_VERSION)
        )
    )


def downgrade() -> None:
    op.drop_index("ix_semantic_cache_agent", table_name="semantic_cache")
    op.drop_table("semantic_cache")
    op.execute(sa.text("UPDATE ledger_meta SET value = '1' WHERE key = 'schema_version'"))
