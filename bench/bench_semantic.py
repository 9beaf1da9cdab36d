"""Semantic routing benchmark: recall@5 of lexical, embedding and hybrid; top-k latency at 10k.

Usage: ``.venv/bin/python bench/bench_semantic.py [--tools 10000] [--queries 600] [--tune]
[--backend auto|onnx-int8|onnx|numpy]``
(needs ``pip install -e '.[semantic]'``).

Relevance is measured on the MetaTool-derived split in ``tests/data`` (199 tools; ``dev`` for
choosing the fusion, ``test`` held out for the reported figures) and, for reference, on the
project's own 540-tool set. Each ranker is a real :class:`Toolbox` and is scored through
``toolbox.select`` with ``tool_top_k=5``: lexical (the default install), embedding alone
(``Fusion(lexical_weight=0)``) and hybrid (the default :class:`Fusion`). ``--tune`` prints the
dev-split grid the default was chosen from (never the test split).

Latency: the 10k-tool toolbox of ``bench_router.py``, with its lexical toolbox as the peer in the
same run. Tool vectors are computed once at registration and kept between runs of this script
by ``default_embedder(cache_dir=...)`` in the temp dir; the rows say whether the query's own
embedding is included.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "data"))

from bench_router import VARIANTS, generate_tools, percentiles
from metatool_dataset import load_metatool_queries, load_metatool_tools
from toolbox_dataset import LabelledQuery, load_queries, load_tools, recall

from supervisor.runtime.policies import ContextPolicy
from supervisor.toolbox import Fusion, Toolbox, reciprocal_rank_fusion
from supervisor.toolbox.semantic import Backend, default_embedder

TOP_K = 8
EMBEDDING_ONLY = Fusion(lexical_weight=0.0)
CACHE_DIR = Path(tempfile.gettempdir()) / "agent-supervisor-bench-semantic"


def names(toolbox: Toolbox, policy: ContextPolicy) -> Callable[[str], list[str]]:
    return lambda query: [entry.name for entry in toolbox.select(query, policy).ranked]


BACKEND: Backend = "auto"


def relevance(label: str, tools: list[Any], splits: dict[str, list[LabelledQuery]]) -> None:
    embedder = default_embedder(cache_dir=CACHE_DIR, backend=BACKEND)
    boxes = {
        "lexical (default install)": Toolbox.from_functions(tools, agent_id="r"),
        "embedding alone": Toolbox.from_functions(
            tools, agent_id="r", embedder=embedder, fusion=EMBEDDING_ONLY
        ),
        "hybrid (default Fusion)": Toolbox.from_functions(tools, agent_id="r", embedder=embedder),
    }
    policy = ContextPolicy(tool_top_k=5)
    header = " | ".join(f"{split} ({len(queries)}) r@1 | r@5" for split, queries in splits.items())
    print(f"\n{label}: {len(tools)} tools")
    print(f"| ranker | {header} |")
    print("|---|" + "---:|---:|" * len(splits))
    for name, box in boxes.items():
        cells = []
        for queries in splits.values():
            result = recall(names(box, policy), queries)
            cells.append(f"{result.at_1:.3f} | {result.at_5:.3f}")
        print(f"| {name} | {' | '.join(cells)} |")


def tune(tools: list[Any], dev: list[LabelledQuery]) -> None:
    """Grid over weighted-RRF settings on the dev split only."""
    embedder = default_embedder(cache_dir=CACHE_DIR, backend=BACKEND)
    box = Toolbox.from_functions(tools, agent_id="t", embedder=embedder)
    policy = ContextPolicy(tool_top_k=5)
    depth = box.fusion.depth
    by_handle = {handle: name for name, handle in box.handles().items()}
    rankings = []
    for item in dev:
        allowed = box._allowed(policy, None)
        lexical = box._lexical.search(item.query, allowed=allowed, limit=depth)
        assert box._embedding is not None
        semantic = box._embedding.search(item.query, allowed=allowed, limit=depth)
        rankings.append((item, lexical, semantic))
    rows = []
    for cut in (10, 20, depth):
        for lexical_weight in (0.0, 0.2, 0.3, 0.5, 0.7, 1.0):
            for k in (2, 5, 10, 20, 60):
                at_1 = at_5 = 0.0
                for item, lexical, semantic in rankings:
                    fused = reciprocal_rank_fusion(
                        [lexical[:cut], semantic[:cut]],
                        k=k,
                        limit=5,
                        weights=(lexical_weight, 1.0),
                    )
                    top = [by_handle[key] for key, _ in fused]
                    at_1 += float(item.relevant[0] in top[:1])
                    at_5 += len(set(item.relevant) & set(top)) / len(item.relevant)
                rows.append((at_5 / len(dev), at_1 / len(dev), lexical_weight, k, cut))
    print(f"\ntuning grid, MetaTool dev ({len(dev)} queries), embedding weight 1.0 (top 25)")
    print("| lexical weight | k | depth | r@1 | r@5 |")
    print("|---:|---:|---:|---:|---:|")
    for at_5, at_1, lexical_weight, k, cut in sorted(rows, reverse=True)[:25]:
        print(f"| {lexical_weight} | {k} | {cut} | {at_1:.3f} | {at_5:.3f} |")
    # How often either ranker alone has the tool in its top 5 (a fused top 5 can also hold a
    # tool both rank 6th to 20th, so this is an indication, not a bound).
    either = sum(
        item.relevant[0] in {by_handle[key] for key, _ in lexical[:5] + semantic[:5]}
        for item, lexical, semantic in rankings
    )
    print(
        f"dev queries whose tool is in the lexical or the embedding top 5: {either / len(dev):.3f}"
    )


def latency(tool_count: int, query_count: int) -> None:
    tools = generate_tools(tool_count)
    lexical = Toolbox.from_functions(tools, agent_id="bench")
    model = default_embedder(cache_dir=CACHE_DIR, backend=BACKEND)
    started = time.perf_counter()
    hybrid = Toolbox.from_functions(tools, agent_id="bench", embedder=model)
    build_seconds = time.perf_counter() - started
    base = [item.query for item in load_queries()]
    queries = [
        f"{query} {VARIANTS[index % len(VARIANTS)]}" if index >= len(base) else query
        for index, query in enumerate(base * (query_count // len(base) + 1))
    ][:query_count]
    policy = ContextPolicy(tool_top_k=TOP_K)
    lexical.select("warm up", policy)
    hybrid.select("warm up", policy)

    assert hybrid._embedding is not None
    dense = hybrid._embedding._dense
    columns: dict[str, list[float]] = {
        "peer: lexical toolbox.select (default install)": [],
        "hybrid toolbox.select, query vector already computed (ranking only)": [],
        f"query embedding alone (MiniLM, {model.backend})": [],
        "hybrid toolbox.select, query embedding included": [],
        "cosine top-20 over all tools alone (query vector given)": [],
    }
    lexical_rows, warm_rows, embed_rows, total_rows, cosine_rows = columns.values()
    clock = time.perf_counter
    # Interleaved per query, so the peer and the hybrid see the same machine load.
    for query in queries:
        started = clock()
        lexical.select(query, policy)
        lexical_rows.append(clock() - started)
        model._queries.clear()
        started = clock()
        hybrid.select(query, policy)  # embeds the query, then ranks
        total_rows.append(clock() - started)
        started = clock()
        hybrid.select(query, policy)  # the vector is in the LRU: ranking only
        warm_rows.append(clock() - started)
        model._queries.clear()
        started = clock()
        vector = model.embed_query(query)
        embed_rows.append(clock() - started)
        started = clock()
        dense.search(vector, allowed=None, limit=hybrid.fusion.depth)
        cosine_rows.append(clock() - started)
    print(f"\nlatency: {len(tools)} tools, {len(queries)} queries, top_k {TOP_K}")
    print(f"hybrid index build (tool vectors from the cache or the model): {build_seconds:.1f} s")
    print("| ranker | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for label, samples in columns.items():
        p50, p95 = percentiles(samples)
        print(f"| {label} | {p50:.3f} | {p95:.3f} |")
    for label, rows in (("vector computed", warm_rows), ("embedding included", total_rows)):
        ratios = sorted(own / peer for own, peer in zip(rows, lexical_rows, strict=True))
        print(
            f"hybrid ({label}) / lexical peer, median of per-query ratios: "
            f"{ratios[len(ratios) // 2]:.1f}x"
        )
    with open("/proc/loadavg", encoding="ascii") as handle:
        print(f"load average after the run: {handle.read().strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--tune", action="store_true", help="print the dev-split fusion grid")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--no-relevance", action="store_true")
    parser.add_argument("--backend", default="auto", choices=["auto", "onnx-int8", "onnx", "numpy"])
    options = parser.parse_args()
    global BACKEND
    BACKEND = options.backend
    print(f"model backend: {default_embedder(backend=BACKEND).backend}")

    metatool = load_metatool_tools()
    dev, test = load_metatool_queries("dev"), load_metatool_queries("test")
    if options.tune:
        tune(metatool, dev)
    print(f"default fusion: {Fusion()}")
    if not options.no_relevance:
        splits = {"dev": dev, "test": test}
        relevance("MetaTool (MIT; tests/data/metatool_*.json)", metatool, splits)
        relevance("project set (tests/data/toolbox_*.json)", load_tools(), {"all": load_queries()})
    if not options.no_latency:
        latency(options.tools, options.queries)


if __name__ == "__main__":
    main()
