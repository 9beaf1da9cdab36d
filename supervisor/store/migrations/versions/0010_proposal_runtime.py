"""Which runtime asked for a call (sdk, claude-code, mcp:<server>, acp:<agent>) and the
assistant turn it belongs to.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import json

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
    # Calls of MCP tools made before this revision ran on an MCP server.
    bind = op.get_bind()
    rows = bind.execute(
        sa.text("SELECT id, target_json FROM proposal WHERE target_json LIKE '%mcp_server%'")
    ).all()
    for proposal_id, target_json in rows:
        server = json.loads(target_json or "{}").get("mcp_server")
        if isinstance(server, str) and server:
            bind.execute(
                sa.text("UPDATE proposal SET runtime = :runtime WHERE id = :id").bindparams(
                    runtime=f"mcp:{server}"[:200], id=proposal_id
                )
            )
    op.execute(
        sa.text("UPDATE ledger_meta SET value = :version WHERE key = 'schema_version'").bindparams(
            version=str(SCHEMA_VERSION)
        )
    )
