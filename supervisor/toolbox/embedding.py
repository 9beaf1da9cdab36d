"""The optional embedding backend: a tiny protocol, a cosine index and rank fusion.

No embedding model ships with the SDK. A host passes any object with
``embed(texts) -> list[list[float]]`` (a local model whose weights ship inside an installed
package; nothing may be downloaded at run time). When one is attached, the toolbox fuses the
lexical and embedding rankings by reciprocal rank fusion.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

#: The ``k`` of reciprocal rank fusion: a document at rank r contributes 1 / (k + r).
RRF_K = 60


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into vectors of one fixed dimension."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


def _normalised(vector: Sequence[float]) -> tuple[float, ...]:
    norm = math.sqrt(sum(value * value for value in vector))
    if norm == 0.0:
        return tuple(0.0 for _ in vector)
    return tuple(value / norm for value in vector)


class EmbeddingIndex:
    """Unit vectors keyed by tool handle, ranked by cosine similarity.

    Args:
        embedder: The backend that embeds documents and queries.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._vectors: dict[str, tuple[float, ...]] = {}

    def __len__(self) -> int:
        return len(self._vectors)

    def add_many(self, documents: Sequence[tuple[str, str]]) -> None:
        """Embed and index ``(key, text)`` pairs in one batch (re-adding a key replaces it)."""
        if not documents:
            return
        vectors = self.embedder.embed([text for _, text in documents])
        if len(vectors) != len(documents):
            raise ValueError(
                f"The embedder returned {len(vectors)} vectors for {len(documents)} texts."
            )
        for (key, _), vector in zip(documents, vectors, strict=True):
            self._vectors[key] = _normalised(vector)

    def remove(self, key: str) -> None:
        """Drop one key; unknown keys are ignored."""
        self._vectors.pop(key, None)

    def search(
        self, query: str, *, allowed: Collection[str] | None = None, limit: int = 50
    ) -> list[tuple[str, float]]:
        """Rank allowed keys by cosine similarity to ``query``.

        Args:
            query: Free text.
            allowed: Keys that may be scored (``None``: all).
            limit: How many to keep.

        Returns:
            ``(key, similarity)`` pairs, best first; ties broken by key.
        """
        if not query.strip() or not self._vectors:
            return []
        query_vector = _normalised(self.embedder.embed([query])[0])
        scored = [
            (key, round(sum(a * b for a, b in zip(query_vector, vector, strict=False)), 9))
            for key, vector in self._vectors.items()
            if allowed is None or key in allowed
        ]
        return heapq.nsmallest(limit, scored, key=lambda item: (-item[1], item[0]))


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[tuple[str, float]]], *, k: int = RRF_K, limit: int | None = None
) -> list[tuple[str, float]]:
    """Fuse rankings: each key scores the sum of ``1 / (k + rank)`` over the rankings it is in.

    Args:
        rankings: Each a best-first list of ``(key, score)``; only the order is used.
        k: Damping constant (60 is the usual choice).
        limit: Keep only the best ``limit`` (``None``: all).

    Returns:
        ``(key, fused score)`` pairs, best first; ties broken by key.
    """
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, (key, _) in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    ordered = sorted(
        ((key, round(score, 9)) for key, score in fused.items()),
        key=lambda item: (-item[1], item[0]),
    )
    return ordered if limit is None else ordered[:limit]
