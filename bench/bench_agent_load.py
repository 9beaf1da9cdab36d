"""Reloading a semantically routed agent: with the tool vectors kept beside the ledger vs without.

An agent saved with ``ContextPolicy(semantic_routing=True)`` is reloaded (``MemAgent.load``, what
a restarted process does) in a fresh process each time. *Ours* finds its tools' vectors in the
``embeddings/`` folder the bundled model keeps beside the ledger; the *peer* is the same load
with that folder moved away, i.e. embedding every tool again (what every load did before).

    .venv/bin/python bench/bench_agent_load.py [--tools 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _tools(count: int) -> list[Any]:
    from supervisor import governed_tool

    tools = []
    for index in range(count):

        def tool(record: str) -> dict[str, str]:
            return {"record": record}

        tool.__name__ = tool.__qualname__ = f"tool_{index}"
        tool.__doc__ = f"Tool {index}: operation {index} on records of kind {index % 17}."
        tools.append(governed_tool(tool))
    return tools


def build(url: str, count: int) -> None:
    from supervisor import ContextPolicy, MemAgentBuilder, SQLModelProvider, Toolbox
    from supervisor.testing import ScriptedModel

    with SQLModelProvider(url) as provider, ScriptedModel([]) as model:
        toolbox = Toolbox.from_functions(_tools(count), memory_provider=provider, agent_id="a")
        llm = {"provider": "openai", "model": "m", "base_url": model.base_url, "api_key": "k"}
        (
            MemAgentBuilder()
            .with_agent_id("a")
            .with_llm_config(llm)
            .with_memory_provider(provider)
            .with_toolbox(toolbox)
            .with_context_policy(ContextPolicy(tool_top_k=3, semantic_routing=True))
            .build_and_save()
        )


def load(url: str, count: int) -> None:
    from supervisor import MemAgent, SQLModelProvider

    tools = _tools(count)
    with SQLModelProvider(url) as provider:
        started = time.perf_counter()
        MemAgent.load("a", memory_provider=provider, tools=tools, api_key="k")
        print(time.perf_counter() - started)


def _timed_load(url: str, count: int) -> float:
    done = subprocess.run(
        [sys.executable, __file__, "--load", url, "--tools", str(count)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", help="internal: time one load of this ledger")
    options = parser.parse_args()
    if options.load:
        load(options.load, options.tools)
        return
    with tempfile.TemporaryDirectory() as home:
        url = f"sqlite:///{Path(home) / 'ledger.db'}"
        build(url, options.tools)
        kept, moved = Path(home) / "embeddings", Path(home) / "moved-away"
        ours: list[float] = []
        peer: list[float] = []
        for _ in range(options.rounds):
            ours.append(_timed_load(url, options.tools))
            kept.rename(moved)
            peer.append(_timed_load(url, options.tools))
            shutil.rmtree(kept, ignore_errors=True)  # what the peer's load wrote
            moved.rename(kept)
    print(
        f"{options.tools} tools, {options.rounds} rounds: MemAgent.load median "
        f"{statistics.median(ours):.3f} s with the kept vectors, {statistics.median(peer):.3f} s "
        f"embedding every tool (peer): {statistics.median(peer) / statistics.median(ours):.1f}x"
    )


if __name__ == "__main__":
    main()
