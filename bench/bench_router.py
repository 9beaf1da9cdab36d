"""Router benchmark: a 10k-tool toolbox (build time, query p50/p95) and the relevance harness.

Usage: ``.venv/bin/python bench/bench_router.py [--tools 10000] [--queries 1200]``

The peer, measured in the same run over the same tools and queries, is a naive full scan: for
each tool, count the query words that occur as substrings of its lower-cased text, then take the
top k. Relevance (recall@1, recall@5) is measured on ``tests/data`` (540 tools, 270 queries).
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "data"))

from toolbox_dataset import (
    governed_from_spec,
    load_queries,
    load_tool_specs,
    load_tools,
    recall,
)

from supervisor.runtime.policies import ContextPolicy
from supervisor.toolbox import Toolbox

VARIANTS = (
    "core emea amer apac sandbox legacy partner internal external archive mobile retail "
    "wholesale europe asia usa canada nordic latam beta"
).split()
TOP_K = 8

AnyTool = Any


def generate_tools(count: int) -> list[AnyTool]:
    """``count`` governed tools: the dataset's tools, then variants of them per region/tenant."""
    specs = load_tool_specs()
    tools: list[AnyTool] = []
    for variant in ("", *VARIANTS):
        for spec in specs:
            if len(tools) >= count:
                return tools
            if not variant:
                tools.append(governed_from_spec(spec))
                continue
            varied = {**spec, "description": f"{spec['description']} For the {variant} tenant."}
            tools.append(governed_from_spec(varied, name=f"{spec['name']}_{variant}"))
    return tools


class NaiveScan:
    """The peer: substring counting over every tool's text, no index."""

    def __init__(self, tools: Sequence[AnyTool]) -> None:
        self.rows = [
            (
                tool.name,
                " ".join(
                    (tool.name.replace("_", " "), tool.description, str(tool.parameters))
                ).lower(),
            )
            for tool in tools
        ]

    def top(self, query: str, k: int) -> list[str]:
        words = [word for word in query.lower().split() if len(word) > 2]
        scored = [(sum(word in text for word in words), name) for name, text in self.rows]
        best = heapq.nsmallest(k, (item for item in scored if item[0]), key=lambda i: (-i[0], i[1]))
        return [name for _, name in best]


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return p50 * 1000, p95 * 1000


def time_queries(run: Callable[[str], object], queries: list[str]) -> list[float]:
    samples = []
    for query in queries:
        started = time.perf_counter()
        run(query)
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=1_200)
    options = parser.parse_args()

    started = time.perf_counter()
    tools = generate_tools(options.tools)
    governed_seconds = time.perf_counter() - started

    started = time.perf_counter()
    toolbox = Toolbox.from_functions(tools, agent_id="bench")
    build_seconds = time.perf_counter() - started
    started = time.perf_counter()
    peer = NaiveScan(tools)
    peer_build_seconds = time.perf_counter() - started

    labelled = load_queries()
    base = [item.query for item in labelled]
    queries = [
        f"{query} {VARIANTS[index % len(VARIANTS)]}" if index >= len(base) else query
        for index, query in enumerate(base * (options.queries // len(base) + 1))
    ][: options.queries]

    open_policy = ContextPolicy(tool_top_k=TOP_K)
    scoped_policy = ContextPolicy(
        tool_top_k=TOP_K, allowed_domains=("crm", "billing", "inventory", "shipping", "github")
    )
    rows: list[tuple[str, float, float]] = []

    def cold(query: str) -> object:
        toolbox._lexical._term_cache.clear()
        return toolbox.select(query, open_policy)

    toolbox.select("warm up", open_policy)
    toolbox.select("warm up", scoped_policy)
    for label, run in (
        ("toolbox.select (all in scope)", lambda q: toolbox.select(q, open_policy)),
        ("toolbox.select (5 domains)", lambda q: toolbox.select(q, scoped_policy)),
        ("toolbox.discover (limit 20)", lambda q: toolbox.discover(q, open_policy, 20)),
        ("toolbox.select, cold (term cache cleared each query)", lambda q: cold(q)),
        ("peer: naive substring scan", lambda q: peer.top(q, TOP_K)),
    ):
        p50, p95 = percentiles(time_queries(run, queries))
        rows.append((label, p50, p95))

    print(f"tools: {len(tools)}  queries: {len(queries)}  top_k: {TOP_K}")
    print(f"governed tool construction (not the router): {governed_seconds:.2f} s")
    print(f"toolbox index build: {build_seconds * 1000:.0f} ms")
    print(f"peer build: {peer_build_seconds * 1000:.0f} ms")
    print()
    print("| ranker | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for label, p50, p95 in rows:
        print(f"| {label} | {p50:.3f} | {p95:.3f} |")

    dataset_tools = load_tools()
    lexical = Toolbox.from_functions(dataset_tools, agent_id="relevance")
    plain = Toolbox("relevance", synonyms=None)
    plain.add(dataset_tools)
    naive = NaiveScan(dataset_tools)
    policy = ContextPolicy(tool_top_k=5)

    def ranked(box: Toolbox) -> Callable[[str], list[str]]:
        return lambda query: [entry.name for entry in box.select(query, policy).ranked]

    print()
    print(f"relevance: {len(dataset_tools)} tools, {len(labelled)} queries")
    print("| ranker | recall@1 | recall@5 |")
    print("|---|---:|---:|")
    for label, rank in (
        ("lexical BM25 (default)", ranked(lexical)),
        ("lexical BM25, no synonym table", ranked(plain)),
        ("peer: naive substring scan", lambda q: naive.top(q, 5)),
    ):
        result = recall(rank, labelled)
        print(f"| {label} | {result.at_1:.3f} | {result.at_5:.3f} |")
        for kind in ("paraphrase", "partial", "hard"):
            subset = [item for item in labelled if item.kind == kind]
            part = recall(rank, subset)
            print(f"|   {kind} ({len(subset)}) | {part.at_1:.3f} | {part.at_5:.3f} |")
    try:
        import rank_bm25  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        print("rank_bm25: not installed (not compared)")
    print("embedding backend: no local embedding package installed (not measured)")


if __name__ == "__main__":
    main()
