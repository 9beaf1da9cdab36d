"""Repository operations for the semantic cache's entries (see :mod:`supervisor.runtime.cache`).

Mixed into :class:`supervisor.store.repository.LedgerTx`.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Session, col, select

from supervisor.ledger.models import CacheEntry
from supervisor.store.cache_table import SemanticCacheRow
from supervisor.store.convert import cache_entry_from_row, cache_entry_to_row


class SemanticCacheMixin:
    """Reading, counting and adding cached answers."""

    session: Session

    def cache_hit(self, key: str, at: datetime) -> str | None:
        """The answer stored under ``key``, counted as a hit at ``at``; ``None``: no entry."""
        row = self.session.get(SemanticCacheRow, key)
        if row is None:
            return None
        row.hits += 1
        row.last_hit_at = at
        self.session.add(row)
        return row.answer

    def cache_candidates(self, agent_id: str, context_hash: str, limit: int) -> list[CacheEntry]:
        """The newest ``limit`` entries of that agent and answer context that have an embedding
        (what a similarity lookup compares), newest first."""
        statement = (
            select(SemanticCacheRow)
            .where(SemanticCacheRow.agent_id == agent_id)
            .where(SemanticCacheRow.tools_hash == context_hash)
            .where(col(SemanticCacheRow.embedding_json).is_not(None))
            .order_by(sa.desc(col(SemanticCacheRow.created_at)))
            .limit(limit)
        )
        return [cache_entry_from_row(row) for row in self.session.exec(statement)]

    def add_cache_entry(self, entry: CacheEntry) -> None:
        """Store ``entry`` unless an entry with its key exists (the first answer stays)."""
        if self.session.get(SemanticCacheRow, entry.key) is None:
            self.session.add(cache_entry_to_row(entry))
