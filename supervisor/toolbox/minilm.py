"""all-MiniLM-L6-v2 run in numpy: the sentence encoder behind ``agent-supervisor[semantic]``.

The weights (safetensors, Apache-2.0) and the tokenizer ship inside an installed package; the
file is memory-mapped and the BERT forward pass (6 layers, 384 wide, 12 heads, mean pooling,
L2-normalised) is written out here, so the extra needs only ``numpy`` and ``tokenizers`` — no
torch, no model hub, nothing downloaded at run time. This module imports numpy and tokenizers
at import time; :mod:`supervisor.toolbox.semantic` imports it only when a model is asked for.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from tokenizers import Tokenizer

Array = NDArray[np.float32]

#: Texts longer than this many word pieces are cut (the model was trained on 128).
MAX_TOKENS = 128
#: Texts encoded per forward pass when embedding many (similar lengths are batched together).
BATCH_SIZE = 32
_LAYER_NORM_EPS = 1e-12
_HEADS = 12
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, NDArray[Any]]:
    """The tensors of a ``.safetensors`` file, memory-mapped (read-only, nothing executed).

    The format is an 8-byte little-endian header length, a JSON header naming each tensor's
    dtype, shape and byte range, then the raw little-endian data.
    """
    with path.open("rb") as handle:
        (header_length,) = struct.unpack("<Q", handle.read(8))
        header: dict[str, Any] = json.loads(handle.read(header_length))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_length)
    tensors: dict[str, NDArray[Any]] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        dtype = _DTYPES[spec["dtype"]]
        tensors[name] = data[start:end].view(dtype).reshape(spec["shape"])
    return tensors


def _layer_norm(values: Array, weight: Array, bias: Array) -> Array:
    mean = values.mean(axis=-1, keepdims=True)
    centred = values - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(variance + _LAYER_NORM_EPS) * weight + bias  # type: ignore[no-any-return]


def _gelu(values: Array) -> Array:
    """Exact (erf) GELU; erf by Abramowitz-Stegun 7.1.26 (absolute error < 1.5e-7)."""
    x = values / np.float32(np.sqrt(2.0))
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = sign * (1.0 - poly * np.exp(-a * a))
    return (0.5 * values * (1.0 + erf)).astype(np.float32)  # type: ignore[no-any-return]


class _Layer:
    """One transformer layer's weights, transposed once for ``x @ W``."""

    def __init__(self, tensors: dict[str, NDArray[Any]], index: int) -> None:
        def get(name: str) -> Array:
            return np.ascontiguousarray(tensors[f"encoder.layer.{index}.{name}"], np.float32)

        self.qkv_weight = np.concatenate(
            [get(f"attention.self.{part}.weight").T for part in ("query", "key", "value")], axis=1
        )
        self.qkv_bias = np.concatenate(
            [get(f"attention.self.{part}.bias") for part in ("query", "key", "value")]
        )
        self.out_weight = np.ascontiguousarray(get("attention.output.dense.weight").T)
        self.out_bias = get("attention.output.dense.bias")
        self.norm1 = (
            get("attention.output.LayerNorm.weight"),
            get("attention.output.LayerNorm.bias"),
        )
        self.up_weight = np.ascontiguousarray(get("intermediate.dense.weight").T)
        self.up_bias = get("intermediate.dense.bias")
        self.down_weight = np.ascontiguousarray(get("output.dense.weight").T)
        self.down_bias = get("output.dense.bias")
        self.norm2 = (get("output.LayerNorm.weight"), get("output.LayerNorm.bias"))

    def __call__(self, hidden: Array, mask_bias: Array) -> Array:
        batch, length, width = hidden.shape
        head = width // _HEADS
        qkv = hidden @ self.qkv_weight + self.qkv_bias
        qkv = qkv.reshape(batch, length, 3, _HEADS, head).transpose(2, 0, 3, 1, 4)
        query, key, value = qkv[0], qkv[1], qkv[2]
        scores = (query @ key.transpose(0, 1, 3, 2)) / np.float32(np.sqrt(head)) + mask_bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ value).transpose(0, 2, 1, 3).reshape(batch, length, width)
        hidden = _layer_norm(context @ self.out_weight + self.out_bias + hidden, *self.norm1)
        inner = _gelu(hidden @ self.up_weight + self.up_bias)
        return _layer_norm(inner @ self.down_weight + self.down_bias + hidden, *self.norm2)


class MiniLMEncoder:
    """A sentence-transformers BERT encoder (mean pooling, unit vectors) from a model folder.

    Args:
        model_dir: A folder holding ``model.safetensors`` and ``tokenizer.json``.
    """

    def __init__(self, model_dir: Path) -> None:
        tensors = read_safetensors(model_dir / "model.safetensors")
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(MAX_TOKENS)

        def get(name: str) -> Array:
            return np.ascontiguousarray(tensors[f"embeddings.{name}"], np.float32)

        self._words = get("word_embeddings.weight")
        self._positions = get("position_embeddings.weight")
        self._token_type = get("token_type_embeddings.weight")[0]
        self._norm = (get("LayerNorm.weight"), get("LayerNorm.bias"))
        count = 1 + max(
            int(name.split(".")[2]) for name in tensors if name.startswith("encoder.layer.")
        )
        self._layers = [_Layer(tensors, index) for index in range(count)]
        self.dimension = int(self._words.shape[1])

    def encode(self, texts: Sequence[str]) -> Array:
        """Unit vectors, one row per text, in order (shape ``(len(texts), 384)``)."""
        output = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return output
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda position: len(encodings[position].ids))
        for start in range(0, len(order), BATCH_SIZE):
            chunk = order[start : start + BATCH_SIZE]
            longest = max(len(encodings[position].ids) for position in chunk)
            ids = np.zeros((len(chunk), longest), dtype=np.int64)
            mask = np.zeros((len(chunk), longest), dtype=np.float32)
            for row, position in enumerate(chunk):
                token_ids = encodings[position].ids
                ids[row, : len(token_ids)] = token_ids
                mask[row, : len(token_ids)] = 1.0
            output[chunk] = self._forward(ids, mask)
        return output

    def _forward(self, ids: NDArray[np.int64], mask: Array) -> Array:
        length = ids.shape[1]
        hidden = self._words[ids] + self._positions[:length] + self._token_type
        hidden = _layer_norm(hidden, *self._norm)
        mask_bias = ((1.0 - mask) * np.float32(-1e4))[:, None, None, :]
        for layer in self._layers:
            hidden = layer(hidden, mask_bias)
        pooled = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(
            mask.sum(axis=1, keepdims=True), 1.0
        )
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)  # type: ignore[no-any-return]
