"""all-MiniLM-L6-v2 run by ONNX Runtime: :mod:`supervisor.toolbox.minilm`'s encoder, faster.

The graph is not downloaded nor read from a file: it is written here, node by node, with
``onnx.helper`` around the safetensors weights the model package ships (the same forward pass
as the numpy module: 6 BERT layers, exact GELU, mean pooling, unit vectors), then handed to
ONNX Runtime in memory on one intra-op thread. A query of a dozen word pieces takes a fraction
of the numpy pass (one fused runtime call instead of some 60 numpy calls, each allocating).

Used by :class:`~supervisor.toolbox.semantic.MiniLMEmbedder` when ``onnxruntime`` and ``onnx``
are installed (the ``semantic`` extra has them); otherwise the numpy pass runs. This module
imports both at import time; it is imported only when a model is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer

from supervisor.toolbox.minilm import BATCH_SIZE, MAX_TOKENS, read_safetensors

Array = NDArray[np.float32]

_OPSET = 17
_LAYER_NORM_EPS = 1e-12
_HEADS = 12


class _GraphBuilder:
    """Collects nodes and initialisers; each helper returns its output's name."""

    def __init__(self, *, int8: bool = False) -> None:
        self.int8 = int8
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def constant(self, hint: str, value: NDArray[Any]) -> str:
        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(np.array(value, order="C"), name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], **attributes: Any) -> str:
        (output,) = self.multi_op(op_type, inputs, 1, **attributes)
        return output

    def multi_op(
        self, op_type: str, inputs: Sequence[str], outputs: int, **attributes: Any
    ) -> list[str]:
        names = [self.name(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **attributes))
        return names

    def linear(self, value: str, weight: NDArray[Any], bias: NDArray[Any], hint: str) -> str:
        """``value @ weight.T + bias`` (PyTorch's ``Linear`` layout, transposed once here).

        With ``int8``: the weight is stored as int8 with one scale per output column
        (symmetric), the input is quantised per call (``DynamicQuantizeLinear``: one scale for
        the whole input tensor), and the integer product is scaled back: ONNX Runtime fuses
        the three into one int8 kernel.
        """
        matrix = np.asarray(weight, np.float32).T
        bias_name = self.constant(f"{hint}_b", np.asarray(bias, np.float32))
        if not self.int8:
            product = self.op("MatMul", [value, self.constant(f"{hint}_w", matrix)])
            return self.op("Add", [product, bias_name])
        scales = np.maximum(np.abs(matrix).max(axis=0), 1e-12) / 127.0
        quantised = np.clip(np.rint(matrix / scales), -127, 127).astype(np.int8)
        codes, step, zero = self.multi_op("DynamicQuantizeLinear", [value], 3)
        integer = self.op("MatMulInteger", [codes, self.constant(f"{hint}_q", quantised), zero])
        column_scales = self.op(
            "Mul", [step, self.constant(f"{hint}_scale", scales.astype(np.float32))]
        )
        product = self.op("Mul", [self.op("Cast", [integer], to=TensorProto.FLOAT), column_scales])
        return self.op("Add", [product, bias_name])

    def layer_norm(self, value: str, weight: NDArray[Any], bias: NDArray[Any], hint: str) -> str:
        return self.op(
            "LayerNormalization",
            [
                value,
                self.constant(f"{hint}_g", np.asarray(weight, np.float32)),
                self.constant(f"{hint}_b", np.asarray(bias, np.float32)),
            ],
            axis=-1,
            epsilon=_LAYER_NORM_EPS,
        )


def build_graph(tensors: dict[str, NDArray[Any]], *, int8: bool = False) -> onnx.ModelProto:
    """The sentence encoder as an ONNX model: ``(input_ids, attention_mask) -> unit vectors``.

    Args:
        tensors: The BERT weights by their sentence-transformers names.
        int8: Store the 36 linear layers' weights as int8 and run them as int8 products
            (embeddings, layer norms and attention stay float32).

    Returns:
        The model (inputs ``input_ids`` int64 and ``attention_mask`` float32, both
        ``[batch, length]``; output ``embedding`` float32 ``[batch, 384]``).
    """
    graph = _GraphBuilder(int8=int8)
    words = graph.constant("words", np.asarray(tensors["embeddings.word_embeddings.weight"]))
    positions = graph.constant(
        "positions", np.asarray(tensors["embeddings.position_embeddings.weight"])
    )
    token_type = graph.constant(
        "token_type", np.asarray(tensors["embeddings.token_type_embeddings.weight"])[0]
    )
    width = int(tensors["embeddings.word_embeddings.weight"].shape[1])
    head = width // _HEADS

    length = graph.op(
        "Gather", [graph.op("Shape", ["input_ids"]), graph.constant("one", np.array(1))]
    )
    steps = graph.op(
        "Range", [graph.constant("zero", np.array(0)), length, graph.constant("step", np.array(1))]
    )
    hidden = graph.op(
        "Add",
        [
            graph.op("Add", [graph.op("Gather", [words, "input_ids"]), token_type]),
            graph.op("Gather", [positions, steps]),
        ],
    )
    hidden = graph.layer_norm(
        hidden,
        tensors["embeddings.LayerNorm.weight"],
        tensors["embeddings.LayerNorm.bias"],
        "embeddings_norm",
    )
    padding = graph.op("Sub", [graph.constant("ones", np.array(1.0, np.float32)), "attention_mask"])
    mask_bias = graph.op(
        "Unsqueeze",
        [
            graph.op("Mul", [padding, graph.constant("minus", np.array(-1e4, np.float32))]),
            graph.constant("axes_12", np.array([1, 2])),
        ],
    )
    split_heads = graph.constant("split_heads", np.array([0, 0, 3, _HEADS, head]))
    merge_heads = graph.constant("merge_heads", np.array([0, 0, width]))
    scale = graph.constant("scale", np.array(1.0 / np.sqrt(head), np.float32))
    root_two = graph.constant("root_two", np.array(np.sqrt(2.0), np.float32))
    half = graph.constant("half", np.array(0.5, np.float32))
    one = graph.constant("one_f", np.array(1.0, np.float32))
    layers = 1 + max(int(name.split(".")[2]) for name in tensors if name.startswith("encoder."))
    for index in range(layers):

        def get(name: str, index: int = index) -> NDArray[Any]:
            return np.asarray(tensors[f"encoder.layer.{index}.{name}"], np.float32)

        qkv_weight = np.concatenate(
            [get(f"attention.self.{part}.weight") for part in ("query", "key", "value")]
        )
        qkv_bias = np.concatenate(
            [get(f"attention.self.{part}.bias") for part in ("query", "key", "value")]
        )
        qkv = graph.linear(hidden, qkv_weight, qkv_bias, f"l{index}_qkv")
        qkv = graph.op("Transpose", [graph.op("Reshape", [qkv, split_heads])], perm=[2, 0, 3, 1, 4])
        query, key, value = (
            graph.op("Gather", [qkv, graph.constant(f"part{part}", np.array(part))], axis=0)
            for part in range(3)
        )
        scores = graph.op("MatMul", [query, graph.op("Transpose", [key], perm=[0, 1, 3, 2])])
        scores = graph.op("Add", [graph.op("Mul", [scores, scale]), mask_bias])
        context = graph.op("MatMul", [graph.op("Softmax", [scores], axis=-1), value])
        context = graph.op(
            "Reshape", [graph.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads]
        )
        attended = graph.linear(
            context,
            get("attention.output.dense.weight"),
            get("attention.output.dense.bias"),
            f"l{index}_out",
        )
        hidden = graph.layer_norm(
            graph.op("Add", [attended, hidden]),
            get("attention.output.LayerNorm.weight"),
            get("attention.output.LayerNorm.bias"),
            f"l{index}_norm1",
        )
        inner = graph.linear(
            hidden, get("intermediate.dense.weight"), get("intermediate.dense.bias"), f"l{index}_up"
        )
        erf = graph.op("Erf", [graph.op("Div", [inner, root_two])])
        inner = graph.op("Mul", [graph.op("Mul", [inner, half]), graph.op("Add", [erf, one])])
        down = graph.linear(
            inner, get("output.dense.weight"), get("output.dense.bias"), f"l{index}_down"
        )
        hidden = graph.layer_norm(
            graph.op("Add", [down, hidden]),
            get("output.LayerNorm.weight"),
            get("output.LayerNorm.bias"),
            f"l{index}_norm2",
        )
    weights = graph.op("Unsqueeze", ["attention_mask", graph.constant("axis2", np.array([2]))])
    axis1 = graph.constant("axis1", np.array([1]))
    summed = graph.op("ReduceSum", [graph.op("Mul", [hidden, weights]), axis1], keepdims=0)
    count = graph.op(
        "Max",
        [
            graph.op("ReduceSum", ["attention_mask", axis1], keepdims=1),
            graph.constant("floor", np.array(1.0, np.float32)),
        ],
    )
    pooled = graph.op("Div", [summed, count])
    graph.nodes.append(helper.make_node("LpNormalization", [pooled], ["embedding"], axis=-1, p=2))
    model = helper.make_model(
        helper.make_graph(
            graph.nodes,
            "minilm",
            [
                helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "length"]),
                helper.make_tensor_value_info(
                    "attention_mask", TensorProto.FLOAT, ["batch", "length"]
                ),
            ],
            [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", width])],
            graph.initializers,
        ),
        opset_imports=[helper.make_opsetid("", _OPSET)],
    )
    model.ir_version = 8
    return model


class OnnxMiniLMEncoder:
    """:class:`~supervisor.toolbox.minilm.MiniLMEncoder`'s interface, run by ONNX Runtime.

    Args:
        model_dir: A folder holding ``model.safetensors`` and ``tokenizer.json``.
        int8: Run the linear layers in int8 (see :func:`build_graph`).
    """

    def __init__(self, model_dir: Path, *, int8: bool = False) -> None:
        tensors = read_safetensors(model_dir / "model.safetensors")
        self.int8 = int8
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self.dimension = int(tensors["embeddings.word_embeddings.weight"].shape[1])
        options = onnxruntime.SessionOptions()
        # One thread: a query is a dozen word pieces; a pool only spins against other work.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            build_graph(tensors, int8=int8).SerializeToString(),
            sess_options=options,
            providers=["CPUExecutionProvider"],
        )

    def encode(self, texts: Sequence[str]) -> Array:
        """Unit vectors, one row per text, in order (shape ``(len(texts), 384)``)."""
        output = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return output
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda position: len(encodings[position].ids))
        # int8 quantises each layer's input with one scale for the whole batch, so a text's
        # vector would depend on its batch-mates (and their padding): one text per run.
        batch = 1 if self.int8 else BATCH_SIZE
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            longest = max(len(encodings[position].ids) for position in chunk)
            ids = np.zeros((len(chunk), longest), dtype=np.int64)
            mask = np.zeros((len(chunk), longest), dtype=np.float32)
            for row, position in enumerate(chunk):
                token_ids = encodings[position].ids
                ids[row, : len(token_ids)] = token_ids
                mask[row, : len(token_ids)] = 1.0
            (vectors,) = self._session.run(
                ["embedding"], {"input_ids": ids, "attention_mask": mask}
            )
            output[chunk] = vectors
        return output
