"""What a supervised process is doing now, and where its log is.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 7


def upgrade() -> None:
    with op.batch_alter_table("process") as batch:
        batch.add_column(sa.Column("log_path", sa.Text(), nullable=True))
        batch.add_column(sa.Column("step_json", sa.Text(), nullable=True))
    op.execute(
        sa.text("UPDATE ledger_meta SET value = :version WHERE key = 'schema_version'").bindparams(
            version=str(SCHEMA_VERSION)
        )
    )
