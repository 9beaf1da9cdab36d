"""A numpy matrix of unit vectors keyed by tool handle: cosine top-k in one matrix product.

Used by :class:`~supervisor.toolbox.embedding.EmbeddingIndex` when the embedder returns arrays
(:class:`~supervisor.toolbox.semantic.MiniLMEmbedder` does), so 10,000 tools rank in well under
a millisecond. Imported only then: it imports numpy.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

Matrix = NDArray[np.float32]
_MASK_CACHE_SIZE = 16


@cache
def _blas_controller() -> Any:
    """threadpoolctl's view of the loaded BLAS libraries (built once: it scans them all)."""
    if importlib.util.find_spec("threadpoolctl") is None:
        return None
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block's numpy products on one BLAS thread (when threadpoolctl is installed).

    The products here are small (one query against 10k rows, a dozen tokens through the
    model): a BLAS thread pool gains little on them and, on a busy machine, its threads
    spinning against other work cost 10x (measured: 12 ms instead of 0.5 ms for the 10k
    matrix-vector product on a loaded 2-core machine).
    """
    controller = _blas_controller()
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield


class DenseVectors:
    """Rows of unit vectors, rebuilt into one matrix lazily after changes."""

    def __init__(self) -> None:
        self._rows: dict[str, Matrix] = {}
        self._keys: list[str] = []
        self._matrix: Matrix | None = None
        self._masks: dict[Collection[str], NDArray[np.bool_]] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def put_many(self, keys: Sequence[str], vectors: Matrix) -> None:
        """Store (or replace) one unit row per key."""
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
        for key, row in zip(keys, unit, strict=True):
            self._rows[key] = row
        self._matrix = None

    def remove(self, key: str) -> None:
        """Drop one key; unknown keys are ignored."""
        if self._rows.pop(key, None) is not None:
            self._matrix = None

    def _built(self) -> Matrix:
        if self._matrix is None:
            self._keys = sorted(self._rows)
            self._matrix = np.stack([self._rows[key] for key in self._keys]).astype(np.float32)
            self._masks.clear()
        return self._matrix

    def _mask(self, allowed: Collection[str]) -> NDArray[np.bool_]:
        """Which rows are allowed; cached per hashable ``allowed`` (the toolbox's frozensets)."""
        hashable = isinstance(allowed, frozenset)
        mask = self._masks.get(allowed) if hashable else None
        if mask is None:
            mask = np.fromiter((key in allowed for key in self._keys), bool, len(self._keys))
            if hashable:
                if len(self._masks) >= _MASK_CACHE_SIZE:
                    self._masks.clear()
                self._masks[allowed] = mask
        return mask

    def search(
        self, query_vector: Any, *, allowed: Collection[str] | None, limit: int
    ) -> list[tuple[str, float]]:
        """The ``limit`` allowed keys most similar to ``query_vector``, best first.

        Ties (after rounding to 9 decimals) are broken by key.
        """
        if not self._rows or limit <= 0:
            return []
        matrix = self._built()
        query = np.asarray(query_vector, dtype=np.float32)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        with one_blas_thread():
            scores = matrix @ query
        if allowed is not None:
            mask = self._mask(allowed)
            scores = np.where(mask, scores, -np.inf)
            limit = min(limit, int(mask.sum()))
            if limit == 0:
                return []
        count = min(limit, len(self._keys))
        if count < len(self._keys):
            size = len(self._keys)
            candidates = np.argpartition(scores, size - count)[size - count :]
        else:
            candidates = np.arange(len(self._keys))
        ranked = [(self._keys[row], round(float(scores[row]), 9)) for row in candidates]
        ranked.sort(key=lambda item: (-item[1], item[0]))
        return ranked
