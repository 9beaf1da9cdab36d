"""Leases: the deadline a live process must renew, the turn lease of a paused checkpoint and
which process waits on which proposal.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 5


def upgrade() -> None:
    with op.batch_alter_table("process") as batch:
        batch.add_column(sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("lost_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "lease",
        sa.Column("resource", sa.String(200), nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("resource"),
    )
    op.create_table(
        "proposal_waiter",
        sa.Column("proposal_id", sa.String(64), nullable=False),
        sa.Column("process_id", sa.String(64), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("proposal_id"),
    )
    op.create_index("ix_proposal_waiter_process", "proposal_waiter", ["process_id"])
    op.execute(
        sa.text("UPDATE ledger_meta SET value = :version WHERE key = 'schema_version'").bindparams(
            version=str(SCHEMA_VERSION)
        )
    )


def downgrade() -> None:
    op.drop_index("ix_proposal_waiter_process", table_name="proposal_waiter")
    op.drop_table("proposal_waiter")
    op.drop_table("lease")
    with op.batch_alter_table("process") as batch:
        batch.drop_column("lost_at")
        batch.drop_column("lease_expires_at")
    op.execute(sa.text("UPDATE ledger_meta SET value = '4' WHERE key = 'schema_version'"))
