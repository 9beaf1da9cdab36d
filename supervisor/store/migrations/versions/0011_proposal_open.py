"""The open proposals in a table of their own; no proposal index holds a column a decision
changes.

A status UPDATE used to rewrite every one of the proposal table's nine indexes, because three of
them held ``status`` (and one ``updated_at``): on PostgreSQL no decision could be a HOT update,
and each was made under the audit chain's lock. The status queries (the inbox, the expiry
sweep, the live threads, the webhook queue) now start from ``proposal_open``: one row per
proposal that is not terminal, with its creation time and expiry (the status stays in
``proposal``). The store writes it with the proposal, in the same transaction: the row when a
proposal is made, nothing while it moves between open statuses, the removal when it becomes
terminal. (Triggers would keep it too, but an AFTER UPDATE trigger costs every UPDATE of the
table ~25 us on PostgreSQL even when its condition is false: more than the HOT update saves.)
The proposal table's ``fillfactor`` leaves room on each page for its rows' updated versions.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

SCHEMA_VERSION = 11

#: The statuses that are not terminal (``ProposalStatus.terminal`` when this was written; a
#: test checks they still agree).
OPEN_STATUSES = ("pending", "approved", "executing", "needs_reconciliation")


def upgrade() -> None:
    op.create_table(
        "proposal_open",
        sa.Column("proposal_id", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("proposal_id"),
    )
    op.create_index("ix_proposal_open_created", "proposal_open", ["created_at", "proposal_id"])
    op.create_index("ix_proposal_open_expires", "proposal_open", ["expires_at"])
    statuses = ", ".join(f"'{status}'" for status in OPEN_STATUSES)
    op.execute(
        "INSERT INTO proposal_open (proposal_id, created_at, expires_at) "
        f"SELECT id, created_at, expires_at FROM proposal WHERE status IN ({statuses})"
    )
    op.drop_index("ix_proposal_status_created", table_name="proposal")
    op.drop_index("ix_proposal_status_expires", table_name="proposal")
    op.drop_index("ix_proposal_status_updated", table_name="proposal")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE proposal SET (fillfactor = 85)")
    op.execute(
        sa.text("UPDATE ledger_meta SET value = :version WHERE key = 'schema_version'").bindparams(
            version=str(SCHEMA_VERSION)
        )
    )


def downgrade() -> None:
    op.create_index("ix_proposal_status_created", "proposal", ["status", "created_at", "id"])
    op.create_index("ix_proposal_status_expires", "proposal", ["status", "expires_at"])
    op.create_index("ix_proposal_status_updated", "proposal", ["status", "updated_at"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE proposal RESET (fillfactor)")
    op.drop_table("proposal_open")
    op.execute("UPDATE ledger_meta SET value = '10' WHERE key = 'schema_version'")
