"""Storage of the semantic cache (schema version 2)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field

from supervisor.store.tables import LedgerTable, UTCDateTime


class SemanticCacheRow(LedgerTable, table=True):
    """One cached answer: keyed by agent, normalised query and the answer context.

    ``tools_hash`` holds the answer-context hash (tool contracts, user, the user's tool scope,
    instructions, model and context policy; see ``supervisor.runtime.cache.answer_context``).
    """

    __tablename__ = "semantic_cache"
    __table_args__ = (sa.Index("ix_semantic_cache_agent", "agent_id", "created_at"),)

    key: str = Field(primary_key=True, max_length=64)
    agent_id: str = Field(max_length=200)
    tools_hash: str = Field(max_length=64)
    query_norm: str = Field(sa_type=sa.Text)
    answer: str = Field(sa_type=sa.Text)
    embedding_json: str | None = Field(default=None, sa_type=sa.Text)
    hits: int = Field(default=0)
    created_at: datetime = Field(sa_type=UTCDateTime)
    last_hit_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
