"""Semantic routing: weighted fusion, the numpy index, the bundled model and the missing extra."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from supervisor.runtime.policies import ContextPolicy
from supervisor.toolbox import Fusion, Toolbox, reciprocal_rank_fusion
from supervisor.toolbox import semantic as semantic_module
from supervisor.toolbox.dense import DenseVectors
from supervisor.toolbox.semantic import (
    INSTALL_HINT,
    Backend,
    MiniLMEmbedder,
    SemanticExtraMissing,
    default_embedder,
)
from supervisor.toolbox.vector_cache import VectorCache
from supervisor.tools.governed import governed_tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
from metatool_dataset import load_metatool_queries, load_metatool_tools
from toolbox_dataset import recall

# fusion ----------------------------------------------------------------------------------------


def test_weighted_rrf_lets_the_heavier_ranking_win_a_disagreement() -> None:
    lexical = [("a", 9.0), ("b", 1.0)]
    semantic = [("b", 0.9), ("a", 0.1)]
    equal = reciprocal_rank_fusion([lexical, semantic], k=5)
    assert equal[0][1] == equal[1][1]  # a tie, broken by key
    assert [key for key, _ in equal] == ["a", "b"]
    weighted = reciprocal_rank_fusion([lexical, semantic], k=5, weights=(0.7, 1.0))
    assert [key for key, _ in weighted] == ["b", "a"]
    assert math.isclose(weighted[0][1], 0.7 / 7 + 1.0 / 6, abs_tol=1e-9)


def test_zero_weight_leaves_the_other_ranking_unchanged() -> None:
    lexical = [("x", 5.0), ("y", 4.0)]
    semantic = [("c", 0.9), ("b", 0.8), ("a", 0.7)]
    fused = reciprocal_rank_fusion([lexical, semantic], k=2, weights=(0.0, 1.0))
    assert [key for key, _ in fused] == ["c", "b", "a"]


def test_fusion_rejects_mismatched_or_negative_weights() -> None:
    with pytest.raises(ValueError, match="one non-negative weight"):
        reciprocal_rank_fusion([[("a", 1.0)], [("a", 1.0)]], weights=(1.0,))
    with pytest.raises(ValueError, match="one non-negative weight"):
        reciprocal_rank_fusion([[("a", 1.0)]], weights=(-1.0,))


def test_default_fusion_weights_lexical_below_the_model() -> None:
    fusion = Fusion()
    assert fusion.lexical_weight < fusion.embedding_weight
    fused = fusion.fuse([("lex", 3.0), ("both", 2.0)], [("both", 0.9), ("sem", 0.8)], limit=3)
    assert [key for key, _ in fused] == ["both", "sem", "lex"]


# the numpy index -------------------------------------------------------------------------------


def test_dense_vectors_rank_by_cosine_within_the_allowed_keys() -> None:
    dense = DenseVectors()
    dense.put_many(
        ["east", "north", "north_east", "west"],
        np.array([[1, 0], [0, 1], [1, 1], [-1, 0]], dtype=np.float32),
    )
    ranked = dense.search(np.array([2.0, 0.1]), allowed=None, limit=3)
    assert [key for key, _ in ranked] == ["east", "north_east", "north"]
    assert math.isclose(ranked[0][1], 2.0 / math.hypot(2.0, 0.1), abs_tol=1e-6)
    allowed = frozenset({"north", "west"})
    assert [key for key, _ in dense.search(np.array([1.0, 0.0]), allowed=allowed, limit=5)] == [
        "north",
        "west",
    ]
    dense.remove("north")
    assert [key for key, _ in dense.search(np.array([1.0, 0.0]), allowed=allowed, limit=5)] == [
        "west"
    ]
    assert dense.search(np.array([1.0, 0.0]), allowed=frozenset(), limit=5) == []
    assert [key for key, _ in dense.search(np.array([1.0, 0.0]), allowed={"west"}, limit=5)] == [
        "west"
    ]


def test_int8_shortlist_returns_the_exact_float_ranking() -> None:
    """10,000 rows clustered like tool vectors: the shortlist path gives the float32 answer."""
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((50, 384)).astype(np.float32)
    rows = centres[rng.integers(0, 50, 10_000)] + 0.6 * rng.standard_normal((10_000, 384))
    keys = [f"tool-{index:05d}" for index in range(10_000)]
    exact, fast = DenseVectors(shortlist=False), DenseVectors(shortlist=True)
    for dense in (exact, fast):
        dense.put_many(keys, rows.astype(np.float32))
    allowed = frozenset(keys[::3])
    for query in rows[rng.integers(0, 10_000, 40)] + rng.standard_normal((40, 384)):
        for scope in (None, allowed):
            want = exact.search(query, allowed=scope, limit=20)
            assert fast.search(query, allowed=scope, limit=20) == want
            assert scope is None or {key for key, _ in want} <= allowed
    assert fast._int8 is not None and exact._int8 is None  # the fast path really ran
    small = frozenset(keys[:7])  # fewer allowed rows than asked for
    assert fast.search(rows[0], allowed=small, limit=20) == exact.search(
        rows[0], allowed=small, limit=20
    )
    assert len(fast.search(rows[0], allowed=small, limit=20)) == 7


def test_dense_ties_are_broken_by_key() -> None:
    dense = DenseVectors()
    dense.put_many(["b", "a", "c"], np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32))
    assert [key for key, _ in dense.search(np.array([1.0, 0.0]), allowed=None, limit=2)] == [
        "a",
        "b",
    ]


class TableEmbedder:
    """An array embedder over a fixed word -> axis table (what the numpy path sees)."""

    AXES = ("money", "people", "files")
    WORDS: ClassVar[dict[str, int]] = {
        "invoice": 0,
        "bill": 0,
        "pay": 0,
        "customer": 1,
        "client": 1,
        "document": 2,
    }

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = self.embed_array(texts).tolist()
        return vectors

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.full((len(texts), len(self.AXES)), 0.01, dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace("_", " ").split():
                axis = self.WORDS.get(word.strip(".,?"))
                if axis is not None:
                    rows[row, axis] += 1.0
        return rows

    def embed_query(self, query: str) -> np.ndarray:
        row: np.ndarray = self.embed_array([query])[0]
        return row


def _tool(name: str, description: str, domain: str) -> Any:
    def function(identifier: str) -> dict[str, str]:
        return {"id": identifier}

    function.__name__ = name
    function.__doc__ = f"{description}\n\nArgs:\n    identifier: Which one."
    return governed_tool(name=name, description=description, domains=(domain,))(function)


def test_array_embedder_uses_the_numpy_index_and_keeps_scope() -> None:
    tools = [
        _tool("send_invoice", "Send an invoice to pay.", "billing"),
        _tool("create_customer", "Create a customer.", "crm"),
        _tool("upload_document", "Upload a document.", "files"),
    ]
    toolbox = Toolbox.from_functions(tools, agent_id="a", embedder=TableEmbedder())
    assert toolbox._embedding is not None and toolbox._embedding._dense is not None
    # "bill" is in no tool's text: only the embedding can find send_invoice.
    top = toolbox.select("bill", ContextPolicy(tool_top_k=1)).ranked
    assert [entry.name for entry in top] == ["send_invoice"]
    scoped = ContextPolicy(tool_top_k=3, allowed_domains=("crm", "files"))
    assert "send_invoice" not in [entry.name for entry in toolbox.select("bill", scoped).ranked]
    toolbox.remove("send_invoice")
    assert len(toolbox._embedding) == 2


# the missing extra -----------------------------------------------------------------------------


def test_missing_extra_is_a_typed_error_naming_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == semantic_module.MODEL_PACKAGE else real_find_spec(name)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(SemanticExtraMissing) as caught:
        default_embedder()
    error = caught.value
    assert error.code == "semantic_extra_missing"
    assert isinstance(error, ImportError)
    assert "pip install 'agent-supervisor[semantic]'" in str(error)
    assert error.hint == f"Run: {INSTALL_HINT}"
    assert error.details["missing"] == [semantic_module.MODEL_PACKAGE]


HEAVY_MODEL_MODULES = (
    "numpy",
    "onnx",
    "onnxruntime",
    "supervisor.toolbox.minilm",
    "supervisor.toolbox.minilm_onnx",
    "tokenizers",
)


def test_the_model_loads_only_when_a_text_is_embedded() -> None:
    code = (
        "import sys, json\n"
        "import supervisor\n"
        "from supervisor.toolbox import Toolbox\n"
        "from supervisor.toolbox.semantic import default_embedder\n"
        "embedder = default_embedder()\n"
        "toolbox = Toolbox('a', embedder=embedder)\n"
        f"names = {HEAVY_MODEL_MODULES!r}\n"
        "before = sorted(n for n in names if n in sys.modules)\n"
        "loaded = embedder.loaded\n"
        "def ping(host: str) -> str:\n"
        "    return host\n"
        "toolbox.add([ping])\n"
        "after = sorted(n for n in names if n in sys.modules)\n"
        "print(json.dumps([before, loaded, after, embedder.loaded]))\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    # The extra installs ONNX Runtime, so the int8 graph runs (it reads the weights with the
    # numpy module's safetensors reader).
    assert json.loads(output) == [[], False, sorted(HEAVY_MODEL_MODULES), True]


# the real bundled model ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model() -> MiniLMEmbedder:
    return default_embedder()


@pytest.mark.parametrize(
    ("backend", "tolerance"), [("numpy", 0.005), ("onnx", 0.005), ("onnx-int8", 0.015)]
)
def test_bundled_model_gives_the_published_similarities(backend: Backend, tolerance: float) -> None:
    model = default_embedder(backend=backend)
    food, bread, cat = model.embed_array(
        ["A man is eating food.", "A man is eating a piece of bread.", "The cat sat on the mat."]
    )
    assert food.shape == (384,)
    assert math.isclose(float(np.linalg.norm(food)), 1.0, abs_tol=1e-5)
    # sentence-transformers' documented score for this pair with all-MiniLM-L6-v2: 0.7553.
    assert math.isclose(float(food @ bread), 0.7553, abs_tol=tolerance)
    assert float(food @ cat) < 0.3
    assert model.embed(["A man is eating food."])[0] == pytest.approx(food.tolist(), abs=1e-5)
    assert model.embed_query("A man is eating food.") is model.embed_query("A man is eating food.")


SENTENCES = [
    "A man is eating food.",
    "Refund the last card payment of this customer.",
    "Will it rain in Lisbon tomorrow?",
    "Open a support ticket about the broken invoice export and assign it to billing.",
]


def test_the_backends_agree(model: MiniLMEmbedder) -> None:
    """ONNX float32 gives numpy's vectors; int8 (the default) stays within cosine 0.97."""
    assert model.backend == "onnx-int8"
    numpy_model = default_embedder(backend="numpy")
    reference = numpy_model.embed_array(SENTENCES)
    onnx_float = default_embedder(backend="onnx").embed_array(SENTENCES)
    int8 = model.embed_array(SENTENCES)
    assert np.allclose(onnx_float, reference, atol=1e-5)
    agreement = (int8 * reference).sum(axis=1)
    assert agreement.min() > 0.97, agreement
    assert not np.allclose(int8, reference, atol=1e-4)  # really another computation
    # A batch of mixed lengths (padding and masks) gives each text's own vector.
    alone = np.stack([model.embed_array([text])[0] for text in SENTENCES])
    assert np.allclose(alone, int8, atol=1e-5)
    assert numpy_model.backend == "numpy"


def test_int8_and_float_vectors_are_cached_apart(tmp_path: Path) -> None:
    int8 = default_embedder(cache_dir=tmp_path)
    float32 = default_embedder(cache_dir=tmp_path, backend="numpy")
    first = int8.embed_array(SENTENCES[:1])
    second = float32.embed_array(SENTENCES[:1])
    assert int8.loaded and float32.loaded  # neither found the other's vector
    assert not np.array_equal(first, second)
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "sentence-transformers__all-MiniLM-L6-v2",
        "sentence-transformers__all-MiniLM-L6-v2__int8",
    ]


def test_bundled_model_lifts_recall_on_the_metatool_dev_split(model: MiniLMEmbedder) -> None:
    tools = load_metatool_tools()
    queries = load_metatool_queries("dev")[::4]  # 100 queries, one per other tool
    policy = ContextPolicy(tool_top_k=5)

    def ranker(toolbox: Toolbox) -> float:
        names = lambda query: [entry.name for entry in toolbox.select(query, policy).ranked]  # noqa: E731
        return recall(names, queries).at_5

    lexical = ranker(Toolbox.from_functions(tools, agent_id="m"))
    hybrid_box = Toolbox.from_functions(tools, agent_id="m", embedder=model)
    hybrid = ranker(hybrid_box)
    assert hybrid_box.backend == "lexical+embedding"
    assert len(queries) == 100
    assert hybrid >= lexical + 0.05, (lexical, hybrid)
    assert hybrid >= 0.75, hybrid


def test_vendored_split_keeps_dev_and_test_apart() -> None:
    dev = load_metatool_queries("dev")
    test = load_metatool_queries("test")
    assert {item.query for item in dev}.isdisjoint(item.query for item in test)
    tools = {tool.name for tool in load_metatool_tools()}
    assert len(tools) == 199
    assert all(set(item.relevant) <= tools for item in dev + test)
    readme = (Path(__file__).resolve().parents[1] / "data" / "README.md").read_text()
    assert "MIT" in readme and "MetaTool" in readme


def test_tool_vectors_cached_on_disk_are_reused_without_loading_the_model(
    model: MiniLMEmbedder, tmp_path: Path
) -> None:
    texts = ["Refund a card payment.", "Open a support ticket."]
    first = default_embedder(cache_dir=tmp_path)
    vectors = first.embed_array(texts)
    assert np.allclose(vectors, model.embed_array(texts), atol=1e-6)
    second = default_embedder(cache_dir=tmp_path)
    again = second.embed_array([texts[1], texts[0]])
    assert not second.loaded  # every vector came from the cache
    assert np.array_equal(again, vectors[::-1])
    mixed = second.embed_array([texts[0], "Close the ticket."])
    assert second.loaded
    assert np.array_equal(mixed[0], vectors[0])
    assert np.allclose(mixed[1], model.embed_array(["Close the ticket."])[0], atol=1e-6)
    third = default_embedder(cache_dir=tmp_path)
    assert np.array_equal(third.embed_array(["Close the ticket."]), mixed[1:])
    assert not third.loaded


def test_a_damaged_cache_is_ignored(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "model")
    cache.put_many(["a", "b"], np.eye(2, dtype=np.float32))
    assert [row is not None for row in VectorCache(tmp_path / "model").get_many(["b", "c"])] == [
        True,
        False,
    ]
    (tmp_path / "model" / "keys.json").write_text('["only one key"]')
    assert VectorCache(tmp_path / "model").get_many(["a"]) == [None]
    (tmp_path / "model" / "vectors.npy").write_bytes(b"not numpy")
    assert VectorCache(tmp_path / "model").get_many(["a"]) == [None]
