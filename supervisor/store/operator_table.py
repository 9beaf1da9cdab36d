"""Storage of named web operators (schema version 8): only the hash of each login token."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from supervisor.store.tables import LedgerTable, UTCDateTime


class OperatorRow(LedgerTable, table=True):
    """One operator who may log in to ``supervisor serve`` (revoked ones are kept)."""

    __tablename__ = "operator"

    name: str = Field(primary_key=True, max_length=64)
    token_hash: str = Field(max_length=64, sa_column_kwargs={"unique": True})
    created_at: datetime = Field(sa_type=UTCDateTime)
    created_by: str = Field(max_length=255)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime, nullable=True)
    last_login_at: datetime | None = Field(default=None, sa_type=UTCDateTime, nullable=True)
