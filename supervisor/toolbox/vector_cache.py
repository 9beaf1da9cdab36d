"""Tool vectors kept on disk between processes, keyed by model and text.

Embedding 10,000 tool descriptions takes minutes on a small machine; a process that rebuilds
its toolbox (``Toolbox.load`` after a restart) finds them here instead. One folder per model:
``keys.json`` (SHA-256 of each text, in row order) and ``vectors.npy`` (float32 rows), written
whole to temporary files and renamed into place, so a reader never sees half a file; when two
processes add at once the last rename wins and the other's new rows are embedded again later.
Only numbers are stored and read (``allow_pickle=False``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

Matrix = NDArray[np.float32]


def text_key(text: str) -> str:
    """The cache key of one text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class VectorCache:
    """Rows of one model's vectors, looked up by text.

    Args:
        folder: This model's folder (created on first write).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._rows: dict[str, int] | None = None
        self._matrix: Matrix | None = None

    def _read(self) -> tuple[dict[str, int], Matrix | None]:
        if self._rows is None:
            self._rows, self._matrix = {}, None
            try:
                keys = json.loads((self.folder / "keys.json").read_text(encoding="utf-8"))
                matrix = np.load(self.folder / "vectors.npy", allow_pickle=False)
            except (OSError, ValueError):
                return self._rows, None
            if isinstance(keys, list) and len(keys) == len(matrix) and matrix.ndim == 2:
                self._rows = {str(key): row for row, key in enumerate(keys)}
                self._matrix = matrix.astype(np.float32, copy=False)
        return self._rows, self._matrix

    def get_many(self, texts: Sequence[str]) -> list[Matrix | None]:
        """The stored vector of each text, or ``None`` where there is none."""
        rows, matrix = self._read()
        found: list[Matrix | None] = []
        for text in texts:
            row = rows.get(text_key(text))
            found.append(None if row is None or matrix is None else matrix[row])
        return found

    def put_many(self, texts: Sequence[str], vectors: Matrix) -> None:
        """Store vectors for texts (existing keys keep their row) and write the folder."""
        rows, matrix = self._read()
        keys = sorted(rows, key=rows.__getitem__)
        fresh = [
            (key, vector)
            for key, vector in zip(map(text_key, texts), vectors, strict=True)
            if key not in rows
        ]
        if not fresh:
            return
        for key, _ in fresh:
            rows[key] = len(keys)
            keys.append(key)
        added = np.stack([vector for _, vector in fresh]).astype(np.float32)
        self._matrix = added if matrix is None else np.concatenate([matrix, added])
        self.folder.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.save(buffer, self._matrix, allow_pickle=False)
        # Vectors first: a reader that sees new vectors with old keys finds the lengths differ
        # and treats the cache as empty.
        self._replace("vectors.npy", buffer.getvalue())
        self._replace("keys.json", json.dumps(keys).encode("utf-8"))

    def _replace(self, name: str, content: bytes) -> None:
        handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=f".{name}.tmp")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(content)
            os.replace(temporary, self.folder / name)
        finally:
            Path(temporary).unlink(missing_ok=True)
