"""Runtime overhead per tool-call turn, and decision -> resume latency across processes.

1. Overhead: an agent run with one tool call and a final reply makes two requests to the scripted
   model on loopback. The peer makes the same two requests with the bare ``openai`` client in the
   same process. The difference is what the runtime adds per tool-call turn (dispatch, outcome,
   trace events, checkpoint in the ledger).
2. Decision -> resume: a second process blocks in ``wait_for_decision``; this process approves
   and takes the time; the other process resumes (claims, runs the tool, records it) and reports
   when it saw the decision and when the resume finished. The peer is the same waiter polling the
   proposal every 100 ms instead of following the ledger's change feed.

Run: .venv/bin/python bench/bench_runtime.py [--turns 200] [--decisions 60]
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


def overhead(turns: int, url: str) -> None:
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

        agent_times: list[float] = []
        bare_times: list[float] = []
        for _ in range(turns):
            started = time.perf_counter()
            assert agent.run("stock?").status == "completed"
            agent_times.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            bare()
            bare_times.append((time.perf_counter() - started) * 1000)
        provider.close()
    agent_ms, bare_ms = statistics.median(agent_times), statistics.median(bare_times)
    print(f"tool-call turn, agent run (2 model requests)  median {agent_ms:6.2f} ms")
    print(f"same 2 requests, bare openai client + dispatch  median {bare_ms:6.2f} ms")
    print(
        f"runtime overhead per tool-call turn            {agent_ms - bare_ms:6.2f} ms "
        f"(ratio {agent_ms / bare_ms:.2f}x)"
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
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--decisions", type=int, default=60)
    parser.add_argument("--waiter", choices=["feed", "poll"])
    parser.add_argument("--url")
    options = parser.parse_args()
    if options.waiter:
        waiter(options.url, options.waiter)
        return
    with tempfile.TemporaryDirectory() as folder:
        overhead(options.turns, f"sqlite:///{Path(folder) / 'overhead.db'}")
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
