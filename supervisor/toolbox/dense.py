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
#: Below this many rows the float32 product alone is cheap; from it on, an int8 shortlist.
SHORTLIST_MIN_ROWS = 2048
#: How many rows the int8 shortlist keeps per wanted result (at least ``SHORTLIST_FLOOR``).
SHORTLIST_FACTOR = 5
SHORTLIST_FLOOR = 100


def _onnx_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


class Int8Scores:
    """Approximate cosine scores of every row: the matrix as int8, one ONNX Runtime product.

    Each row is stored as int8 with its own scale (a quarter of float32's bytes: 3.8 MB for
    10,000 x 384, which stays in cache); the query is quantised per call. Scores are off by a
    few hundredths at most, so they only shortlist rows that are then scored exactly.
    """

    def __init__(self, matrix: Matrix) -> None:
        import onnxruntime
        from onnx import TensorProto, helper, numpy_helper

        scales = np.maximum(np.abs(matrix).max(axis=1), 1e-12) / 127.0
        codes = np.clip(np.rint(matrix / scales[:, None]), -127, 127).astype(np.int8)
        nodes = [
            helper.make_node("Unsqueeze", ["query", "axis0"], ["row"]),
            helper.make_node("DynamicQuantizeLinear", ["row"], ["codes", "step", "zero"]),
            helper.make_node("MatMulInteger", ["codes", "matrix", "zero"], ["integer"]),
            helper.make_node("Cast", ["integer"], ["product"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["product", "scales"], ["scaled"]),
            helper.make_node("Mul", ["scaled", "step"], ["scores2d"]),
            helper.make_node("Squeeze", ["scores2d", "axis0"], ["scores"]),
        ]
        rows, width = matrix.shape
        graph = helper.make_graph(
            nodes,
            "int8_cosine",
            [helper.make_tensor_value_info("query", TensorProto.FLOAT, [width])],
            [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [rows])],
            [
                numpy_helper.from_array(np.ascontiguousarray(codes.T), "matrix"),
                numpy_helper.from_array(scales.astype(np.float32), "scales"),
                numpy_helper.from_array(np.array([0], dtype=np.int64), "axis0"),
            ],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def __call__(self, query: Matrix) -> NDArray[np.float32]:
        (scores,) = self._session.run(["scores"], {"query": query})
        return scores  # type: ignore[no-any-return]


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
    """Rows of unit vectors, rebuilt into one matrix lazily after changes.

    From :data:`SHORTLIST_MIN_ROWS` rows on, and when ONNX Runtime is installed, a search first
    shortlists rows by int8 scores (:class:`Int8Scores`, about 0.15 ms for 10,000 x 384
    instead of 0.8 ms for the float32 product on this machine), then scores the shortlist
    exactly in float32: the returned scores are always exact; a row is missed only if int8
    error pushes it out of a shortlist five times (at least 100 rows) longer than asked for.

    Args:
        shortlist: Use the int8 shortlist (``None``: when ONNX Runtime is installed).
    """

    def __init__(self, *, shortlist: bool | None = None) -> None:
        self._rows: dict[str, Matrix] = {}
        self._keys: list[str] = []
        self._matrix: Matrix | None = None
        self._masks: dict[Collection[str], NDArray[np.bool_]] = {}
        self.shortlist = _onnx_installed() if shortlist is None else shortlist
        self._int8: Int8Scores | None = None

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
            self._int8 = None
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
        size = len(self._keys)
        shortlist = max(SHORTLIST_FACTOR * limit, SHORTLIST_FLOOR)
        approximate = self.shortlist and size >= SHORTLIST_MIN_ROWS and shortlist < size
        if approximate:
            if self._int8 is None:
                self._int8 = Int8Scores(matrix)
            scores = self._int8(query)
        else:
            with one_blas_thread():
                scores = matrix @ query
        if allowed is not None:
            mask = self._mask(allowed)
            scores = np.where(mask, scores, -np.inf)
            limit = min(limit, int(mask.sum()))
            if limit == 0:
                return []
        count = min(shortlist if approximate else limit, size)
        if count < size:
            candidates = np.argpartition(scores, size - count)[size - count :]
        else:
            candidates = np.arange(size)
        if approximate:  # exact float32 scores of the shortlist; keep the allowed ones
            exact = matrix[candidates] @ query
            keep = np.isfinite(scores[candidates])
            candidates, exact = candidates[keep], exact[keep]
            ranked = [
                (self._keys[row], round(float(score), 9))
                for row, score in zip(candidates, exact, strict=True)
            ]
            ranked.sort(key=lambda item: (-item[1], item[0]))
            return ranked[:limit]
        ranked = [(self._keys[row], round(float(scores[row]), 9)) for row in candidates]
        ranked.sort(key=lambda item: (-item[1], item[0]))
        return ranked
