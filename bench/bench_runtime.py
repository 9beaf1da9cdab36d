"""Runtime overhead per tool-call turn, and decision -> resume latency across processes.

1. Overhead: an agent run with one tool call and a final reply makes two requests to the scripted
   model on loopback. The peer makes the same two requests with the bare ``openai`` client in the
   same process. The difference is what the runtime adds per tool-call turn (dispatch, outcome,
   trace events, checkpoint in the ledger).
2. Decision -> resume: a second process blocks in ``wait_for_decision``; this process approves
   and takes the time; the other process resumes (claims, runs the tool, records it) and reports
   when it saw the decision and when the resume finished. The peer is the same waiter polling the
   proposal every 100 ms instead of following the ledger's change feed.

Run: .venv/bin/python bench/bench_runtime.py [--rounds 10] [--turns 20] [--decisions 60]
(``--decisions 0`` measures the overhead only.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from supervisor import MemAgent, MemAgentBuilder, SQLModelProvider
from supervisor.demo.tools import create_customer, inventory_lookup
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall, Turn

AGENT_ID = "bench-agent"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _script(request: Any) -> Turn:
    last = request.messages[-1]
    if last["role"] == "tool":
        return Reply("done")
    if "Create" in str(last.get("content", "")):
        return CallTools([ToolCall("create_customer", {"name": "Ada", "email": "a@b.c"})])
    return CallTools([ToolCall("inventory_lookup", {"sku": "A-100"})])


def overhead(rounds: int, turns: int, url: str) -> None:
    """Agent runs and bare-client turns, alternating turn by turn; one ratio per round.

    A round is ``turns`` turns of each path, interleaved (each path goes first in half of the
    pairs); its ratio is the ratio of the two medians. The figure is the median of the rounds'
    ratios, so a burst of load from other processes lands on both paths of the same round.
    """
    with ScriptedModel(_script) as model:
        provider = SQLModelProvider(url)
        agent = (
            MemAgentBuilder()
            .with_agent_id(AGENT_ID)
            .with_llm_config(
                {"provider": "openai", "model": "m", "base_url": model.base_url, "api_key": "k"}
            )
            .with_memory_provider(provider)
            .with_tools([inventory_lookup])
            .build()
        )
        import openai

        client = openai.OpenAI(base_url=model.base_url, api_key="k")
        tools: list[Any] = [inventory_lookup.openai.definition]

        def bare() -> None:
            messages: list[Any] = [{"role": "user", "content": "stock?"}]
            first = client.chat.completions.create(model="m", messages=messages, tools=tools)
            call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
            result = inventory_lookup.dispatch(call.function.arguments)  # type: ignore[union-attr]
            messages.append(first.choices[0].message.model_dump(exclude_none=True))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": result.model_content()}
            )
            client.chat.completions.create(model="m", messages=messages, tools=tools)

        def agent_turn() -> None:
            assert agent.run("stock?").status == "completed"

        def timed(turn: Any) -> float:
            started = time.perf_counter()
            turn()
            return (time.perf_counter() - started) * 1000

        for _ in range(turns):  # warm-up: connections, caches, first checkpoints
            timed(agent_turn), timed(bare)
        agent_times: list[float] = []
        bare_times: list[float] = []
        ratios: list[float] = []
        for _ in range(rounds):
            agent_block: list[float] = []
            bare_block: list[float] = []
            for index in range(turns):  # alternate turn by turn, each path first half the time
                if index % 2:
                    bare_block.append(timed(bare))
                    agent_block.append(timed(agent_turn))
                else:
                    agent_block.append(timed(agent_turn))
                    bare_block.append(timed(bare))
            agent_times += agent_block
            bare_times += bare_block
            ratios.append(statistics.median(agent_block) / statistics.median(bare_block))
        provider.close()
    agent_ms, bare_ms = statistics.median(agent_times), statistics.median(bare_times)
    print(f"tool-call turn, agent run (2 model requests)  median {agent_ms:6.2f} ms")
    print(f"same 2 requests, bare openai client + dispatch  median {bare_ms:6.2f} ms")
    print(
        f"runtime overhead per tool-call turn            {agent_ms - bare_ms:6.2f} ms "
        f"(ratio of medians {agent_ms / bare_ms:.2f}x)"
    )
    low, high = min(ratios), max(ratios)
    print(
        f"agent / bare, median of {rounds} round ratios   {statistics.median(ratios):6.2f}x "
        f"(rounds {low:.2f}-{high:.2f}x, {turns} turns each)"
    )


def waiter(url: str, mode: str) -> None:
    """Child process: for each proposal id on stdin, wait for its decision and resume it."""
    agent = MemAgent.load(
        AGENT_ID, memory_provider=SQLModelProvider(url), allowlist=["supervisor.demo.tools:*"]
    )
    print("ready", flush=True)
    for line in sys.stdin:
        proposal_id = line.strip()
        if mode == "feed":
            agent.wait_for_decision(proposal_id, timeout=30)
        else:
            while agent.ledger.get(proposal_id).status.value == "pending":
                time.sleep(0.1)
        seen = time.time()
        resumed = agent.resume_approval(proposal_id)
        print(json.dumps({"seen": seen, "done": time.time(), "ok": resumed.consumed}), flush=True)


def decisions(count: int, url: str, mode: str) -> tuple[list[float], list[float]]:
    with ScriptedModel(_script) as model:
        provider = SQLModelProvider(url)
        agent = (
            MemAgentBuilder()
            .with_agent_id(AGENT_ID)
            .with_llm_config(
                {"provider": "openai", "model": "m", "base_url": model.base_url, "api_key": "k"}
            )
            .with_memory_provider(provider)
            .with_tools([inventory_lookup, create_customer])
            .build_and_save()
        )
        child = subprocess.Popen(
            [sys.executable, __file__, "--waiter", mode, "--url", url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, **model.env()},
        )  # fmt: skip
        assert child.stdin is not None and child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        seen: list[float] = []
        done: list[float] = []
        for index in range(count):
            paused = agent.run(f"Create customer {index}")
            proposal_id = paused.proposals[0].proposal_id
            child.stdin.write(proposal_id + "\n")
            child.stdin.flush()
            time.sleep(0.15)  # let the waiter block before the decision
            decided_at = time.time()
            agent.approve(proposal_id, approver_id="bench")
            report = json.loads(child.stdout.readline())
            assert report["ok"]
            seen.append((report["seen"] - decided_at) * 1000)
            done.append((report["done"] - decided_at) * 1000)
        child.stdin.close()
        child.wait(timeout=30)
        provider.close()
    return seen, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--turns", type=int, default=20, help="turns per path per round")
    parser.add_argument("--decisions", type=int, default=60)
    parser.add_argument("--waiter", choices=["feed", "poll"])
    parser.add_argument("--url")
    options = parser.parse_args()
    if options.waiter:
        waiter(options.url, options.waiter)
        return
    with tempfile.TemporaryDirectory() as folder:
        overhead(options.rounds, options.turns, f"sqlite:///{Path(folder) / 'overhead.db'}")
        if not options.decisions:
            return
        rows = []
        for mode in ("feed", "poll"):
            url = f"sqlite:///{Path(folder) / f'decisions-{mode}.db'}"
            seen, done = decisions(options.decisions, url, mode)
            rows.append((mode, seen, done))
        print()
        print("decision -> resume on SQLite (ms)     seen p50  seen p95  resumed p50  resumed p95")
        for mode, seen, done in rows:
            label = (
                "wait_for_decision (change feed)" if mode == "feed" else "peer: poll every 100 ms"
            )
            print(
                f"{label:36s} {_percentile(seen, 0.5):8.1f} {_percentile(seen, 0.95):9.1f} "
                f"{_percentile(done, 0.5):12.1f} {_percentile(done, 0.95):12.1f}"
            )


if __name__ == "__main__":
    main()
