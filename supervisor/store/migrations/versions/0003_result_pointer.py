"""Issued result pointers: which agent thread (and user) may read an offloaded result back.

Also widens ``trace_event.blob_ref`` to hold a prefixed reference (``sha256:`` + 64 hex digits,
71 characters): PostgreSQL enforced the old 64 and refused every offloaded result's trace
event. SQLite does not enforce VARCHAR lengths, so its table is left as it is.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 3


def upgrade() -> None:
    op.create_table(
        "result_pointer",
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("agent_id", sa.String(200), nullable=False),
        sa.Column("thread_id", sa.String(200), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("issued_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("digest", "agent_id", "thread_id", "user_id"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("trace_event", "blob_ref", type_=sa.String(80), existing_nullable=True)
    op.execute(
        sa.text("UPDATE ledger_meta SET value = :version WHERE key = 'schema_version'").bindparams(
            version=str(SCHEMA_VERSION)
        )
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("trace_event", "blob_ref", type_=sa.String(64), existing_nullable=True)
    op.drop_table("result_pointer")
    op.execute(sa.text("UPDATE ledger_meta SET value = '2' WHERE key = 'schema_version'"))
