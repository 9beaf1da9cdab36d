"""The optional embedding backend: a tiny protocol, a cosine index and rank fusion.

The default install has no model. A host passes any object with
``embed(texts) -> list[list[float]]`` (a local model whose weights ship inside an installed
package; nothing may be downloaded at run time), or the bundled one from
``agent-supervisor[semantic]`` (:func:`supervisor.toolbox.semantic.default_embedder`). When one
is attached, the toolbox fuses the lexical and embedding rankings by weighted reciprocal rank
fusion (:class:`Fusion`).

An embedder that also has ``embed_array(texts)`` and ``embed_query(text)`` returning numpy
arrays gets a numpy index (:mod:`supervisor.toolbox.dense`); others a pure-Python one.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

#: The ``k`` of reciprocal rank fusion: a document at rank r contributes w / (k + r).
RRF_K = 60


@dataclass(frozen=True)
class Fusion:
    """How the toolbox fuses its lexical and embedding rankings (weighted RRF).

    The defaults were chosen on the MetaTool dev split only (``bench/bench_semantic.py
    --tune``; the held-out test split gives the reported figures): a small ``k`` lets each
    ranker's first places count, and the lexical ranking, weaker than the bundled model's
    there, counts 0.7 of it. Equal weights with ``k=60`` lost to the embedding alone. Fusing
    20 deep instead of 50 cost one dev query in 398 and halves the lexical ranker's work.

    Attributes:
        lexical_weight: Weight of the BM25 ranking.
        embedding_weight: Weight of the cosine ranking.
        k: RRF damping constant.
        depth: How deep each ranking goes before fusion.
    """

    lexical_weight: float = 0.7
    embedding_weight: float = 1.0
    k: int = 5
    depth: int = 20

    def fuse(
        self,
        lexical: Sequence[tuple[str, float]],
        semantic: Sequence[tuple[str, float]],
        limit: int,
    ) -> list[tuple[str, float]]:
        """The fused top ``limit`` of two best-first rankings."""
        return reciprocal_rank_fusion(
            [lexical, semantic],
            k=self.k,
            limit=limit,
            weights=(self.lexical_weight, self.embedding_weight),
        )


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
        self._dense: Any = None
        self._array_embedder = callable(getattr(embedder, "embed_array", None))

    def __len__(self) -> int:
        return len(self._dense) if self._dense is not None else len(self._vectors)

    def add_many(self, documents: Sequence[tuple[str, str]]) -> None:
        """Embed and index ``(key, text)`` pairs in one batch (re-adding a key replaces it)."""
        if not documents:
            return
        if self._array_embedder:
            if self._dense is None:
                from supervisor.toolbox.dense import DenseVectors

                self._dense = DenseVectors()
            array = self.embedder.embed_array([text for _, text in documents])  # type: ignore[attr-defined]
            self._dense.put_many([key for key, _ in documents], array)
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
        if self._dense is not None:
            self._dense.remove(key)
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
        if not query.strip() or not len(self):
            return []
        if self._dense is not None:
            query_array = self.embedder.embed_query(query)  # type: ignore[attr-defined]
            ranked: list[tuple[str, float]] = self._dense.search(
                query_array, allowed=allowed, limit=limit
            )
            return ranked
        query_vector = _normalised(self.embedder.embed([query])[0])
        scored = [
            (key, round(sum(a * b for a, b in zip(query_vector, vector, strict=False)), 9))
            for key, vector in self._vectors.items()
            if allowed is None or key in allowed
        ]
        return heapq.nsmallest(limit, scored, key=lambda item: (-item[1], item[0]))


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[tuple[str, float]]],
    *,
    k: int = RRF_K,
    limit: int | None = None,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse rankings: each key scores the sum of ``w / (k + rank)`` over the rankings it is in.

    Args:
        rankings: Each a best-first list of ``(key, score)``; only the order is used.
        k: Damping constant (60 is the usual choice).
        limit: Keep only the best ``limit`` (``None``: all).
        weights: One weight per ranking (``None``: all 1.0).

    Returns:
        ``(key, fused score)`` pairs, best first; ties broken by key.

    Raises:
        ValueError: ``weights`` does not have one entry per ranking, or one is negative.
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings) or any(weight < 0 for weight in weights):
        raise ValueError("reciprocal_rank_fusion needs one non-negative weight per ranking.")
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        if weight == 0:
            continue
        for rank, (key, _) in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    ordered = sorted(
        ((key, round(score, 9)) for key, score in fused.items()),
        key=lambda item: (-item[1], item[0]),
    )
    return ordered if limit is None else ordered[:limit]
