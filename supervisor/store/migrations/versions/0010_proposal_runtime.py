"""Which agent runtime asked for a call (sdk, claude-code, mcp:<server>, acp:<agent>) and the
assistant turn it belongs to. Every call recorded before this revision was this SDK's (sdk).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 10


def upgrade() -> None:
    with op.batch_alter_table("proposal") as batch:
        batch.add_column(sa.Column("runtime", sa.String(200), nullable=False, server_default="sdk"))
        batch.add_column(sa.Column("turn_id", sa.String(200), nullable=True))
    op.create_index("ix_proposal_runtime", "proposal", ["runtime", "created_at", "id"])
    op.execute(
        sa.text("UPDATE ledger_meta SET value = :version WHERE key = 'schema_version'").bindparams(
            version=str(SCHEMA_VERSION)
        )
    )
