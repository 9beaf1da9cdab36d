"""Rule evaluation per call (issue 14; goal p95 <= 50 us with 1,000 rules).

A rule set of 1,000 rules like a team's: 900 exact-tool rules (a quarter with a CEL condition),
90 glob rules over tool families, 10 domain rules, and calls drawn over 300 tools. The peer, in
the same rounds: a dict lookup of the tool's name in a set of allowed tools, the floor of any
per-call policy check.

    .venv/bin/python bench/bench_rules.py --calls 20000 --rounds 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from supervisor.rules.loader import rules_from_document
from supervisor.rules.model import CallFacts


def _rules() -> list[dict[str, Any]]:
    tables: list[dict[str, Any]] = []
    for index in range(900):
        table: dict[str, Any] = {
            "name": f"tool {index}", "verdict": ("allow", "ask", "deny")[index % 3],
            "reason": "bench", "tool": f"family{index % 30}.tool{index}",
        }  # fmt: skip
        if index % 4 == 0:
            table["when"] = f'args.amount < {index} && args.path.startsWith("/tmp/")'
        tables.append(table)
    for index in range(90):
        tables.append({"name": f"family {index}", "verdict": "ask", "reason": "bench",
                       "tool": f"family{index}.*", "agents": [f"agent-{index % 7}*"]})  # fmt: skip
    for index in range(10):
        tables.append({"name": f"domain {index}", "verdict": "deny", "reason": "bench",
                       "domains": [f"domain{index}"], "when": "args.amount > 1000000"})  # fmt: skip
    return tables


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ruleset = rules_from_document({"rules": _rules()})
    assert len(ruleset) == 1000
    generator = random.Random(7)
    calls = [
        CallFacts(
            tool=f"family{(tool := generator.randrange(300)) % 30}.tool{tool}",
            arguments={"amount": generator.randrange(2000), "path": "/tmp/x"},
            domains=(f"domain{generator.randrange(20)}",),
            agent=f"agent-{generator.randrange(9)}",
        )
        for _ in range(args.calls)
    ]
    allowed = {call.tool for call in calls[::2]}
    ours: list[float] = []
    peer: list[float] = []
    samples: list[float] = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for call in calls:
            ruleset.evaluate(call)
        ours.append((time.perf_counter() - start) / len(calls))
        start = time.perf_counter()
        for call in calls:
            _ = call.tool in allowed
        peer.append((time.perf_counter() - start) / len(calls))
        for call in calls[:2000]:
            begin = time.perf_counter()
            ruleset.evaluate(call)
            samples.append(time.perf_counter() - begin)
    samples.sort()
    p50, p95 = samples[len(samples) // 2], samples[int(len(samples) * 0.95)]
    print(f"1000 rules, {args.calls} calls x {args.rounds} rounds")
    print(f"evaluate: median per call {statistics.median(ours) * 1e6:.2f} us "
          f"(per-call samples p50 {p50 * 1e6:.2f} us, p95 {p95 * 1e6:.2f} us)")  # fmt: skip
    print(f"peer (set lookup): {statistics.median(peer) * 1e6:.3f} us per call; ratio "
          f"{statistics.median(ours) / statistics.median(peer):.0f}x")  # fmt: skip


if __name__ == "__main__":
    main()
