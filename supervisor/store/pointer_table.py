"""Storage of issued result pointers (schema version 3)."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from supervisor.store.tables import LedgerTable, UTCDateTime


class ResultPointerRow(LedgerTable, table=True):
    """One offloaded result handed to one agent thread (and user): who may read it back.

    ``user_id`` is ``""`` for runs without a user, so the key has no NULL in it.
    """

    __tablename__ = "result_pointer"

    digest: str = Field(primary_key=True, max_length=64)
    agent_id: str = Field(primary_key=True, max_length=200)
    thread_id: str = Field(primary_key=True, max_length=200)
    user_id: str = Field(primary_key=True, max_length=200)
    issued_at: datetime = Field(sa_type=UTCDateTime)
