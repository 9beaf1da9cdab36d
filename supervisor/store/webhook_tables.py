"""Storage of webhooks and their deliveries (schema version 8).

A ``webhook`` row holds the receiver's URL and the shared HMAC secret the sender signs with
(it must be readable by every process that sends, so it is stored as given; anyone who can
read the ledger can read it). A ``webhook_delivery`` row is one event for one webhook: the
unique (webhook, proposal, event) key makes "one POST per blocked proposal" hold however many
senders run, and its claim columns let exactly one sender attempt it at a time.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field

from supervisor.store.tables import LedgerTable, UTCDateTime


class WebhookRow(LedgerTable, table=True):
    """One receiver of blocked-proposal events."""

    __tablename__ = "webhook"

    id: str = Field(primary_key=True, max_length=64)
    url: str = Field(sa_type=sa.Text)
    format: str = Field(max_length=16)
    base_url: str | None = Field(default=None, sa_type=sa.Text, nullable=True)
    secret: str = Field(max_length=200)
    created_at: datetime = Field(sa_type=UTCDateTime)
    created_by: str = Field(max_length=255)
    removed_at: datetime | None = Field(default=None, sa_type=UTCDateTime, nullable=True)
    removed_by: str | None = Field(default=None, max_length=255, nullable=True)


class WebhookDeliveryRow(LedgerTable, table=True):
    """One event for one webhook, its attempts and its outcome."""

    __tablename__ = "webhook_delivery"
    __table_args__ = (
        sa.UniqueConstraint("webhook_id", "proposal_id", "event", name="uq_webhook_delivery"),
        sa.Index("ix_webhook_delivery_due", "state", "next_attempt_at"),
        sa.Index("ix_webhook_delivery_created", "created_at", "id"),
    )

    id: str = Field(primary_key=True, max_length=64)
    webhook_id: str = Field(max_length=64)
    proposal_id: str | None = Field(default=None, max_length=64, nullable=True)
    event: str = Field(max_length=32)
    state: str = Field(max_length=16)
    attempts: int = 0
    last_status: int | None = Field(default=None, nullable=True)
    last_error: str | None = Field(default=None, sa_type=sa.Text, nullable=True)
    created_at: datetime = Field(sa_type=UTCDateTime)
    updated_at: datetime = Field(sa_type=UTCDateTime)
    next_attempt_at: datetime = Field(sa_type=UTCDateTime)
    claimed_by: str | None = Field(default=None, max_length=200, nullable=True)
    claimed_until: datetime | None = Field(default=None, sa_type=UTCDateTime, nullable=True)
    delivered_at: datetime | None = Field(default=None, sa_type=UTCDateTime, nullable=True)
