"""Storage of leases and proposal waiters (schema version 5).

A process's own lease is two columns of its process row (renewed by its heartbeat); the rows
here are the turn leases of paused checkpoints and the link from a proposal to the process
waiting on it.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field

from supervisor.store.tables import LedgerTable, UTCDateTime


class LeaseRow(LedgerTable, table=True):
    """One named resource held by one holder until ``expires_at`` (renewed while it works)."""

    __tablename__ = "lease"

    resource: str = Field(primary_key=True, max_length=200)
    holder: str = Field(max_length=200)
    acquired_at: datetime = Field(sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)


class ProposalWaiterRow(LedgerTable, table=True):
    """The process that waits on a proposal to resume its run (one per proposal)."""

    __tablename__ = "proposal_waiter"
    __table_args__ = (sa.Index("ix_proposal_waiter_process", "process_id"),)

    proposal_id: str = Field(primary_key=True, max_length=64)
    process_id: str = Field(max_length=64)
    since: datetime = Field(sa_type=UTCDateTime)
