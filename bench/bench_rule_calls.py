"""What the stored policy costs a call in the agent runtime (SQLite file ledger).

Every call asks the ledger's policy in force (``decide_call``: one read transaction, the rules
compiled once per version). Three agent runs of one tool call each, in the same process, on
the same ledger and scripted model:

* read-only tool, no policy stored (the baseline: the runtime as it runs by default);
* read-only tool, a policy of 1,000 rules stored (none about it);
* side-effecting tool allowed by a rule: the call is recorded, decided by the rule, claimed,
  run and completed in the same turn (what used to be a pause for a person).

Also ``decide_call`` alone, p50/p95, with 1,000 rules.

Run: .venv/bin/python bench/bench_rule_calls.py [--runs 200]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from supervisor import MemAgentBuilder, SQLModelProvider
from supervisor.demo.tools import create_customer, inventory_lookup
from supervisor.ledger.policy import ApprovalPolicy
from supervisor.rules.model import CallFacts
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall, Turn


def _script(request: Any) -> Turn:
    last = request.messages[-1]
    if last["role"] == "tool":
        return Reply("done")
    if "Create" in str(last.get("content", "")):
        return CallTools([ToolCall("create_customer", {"name": "Ada", "email": "a@b.c"})])
    return CallTools([ToolCall("inventory_lookup", {"sku": "A-100"})])


def _policy(count: int) -> ApprovalPolicy:
    rules: list[dict[str, Any]] = [
        {"name": f"r{n}", "verdict": "ask" if n % 3 else "deny", "reason": "bench",
         "tool": f"tool_{n % 97}.*", "when": f"args.amount > {n}"}
        for n in range(count - 1)
    ]  # fmt: skip
    rules.append({"name": "customers", "verdict": "allow", "reason": "bench",
                  "tool": "create_customer"})  # fmt: skip
    return ApprovalPolicy(rules=rules)


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(samples):6.2f} ms  p95 {p95:6.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-rule-calls-"))
    url = f"sqlite:///{folder / 'ledger.db'}"
    with ScriptedModel(_script) as model, SQLModelProvider(url) as provider:
        config = {"provider": "openai", "model": "m", "base_url": model.base_url, "api_key": "k"}
        agent = (
            MemAgentBuilder().with_agent_id("bench").with_llm_config(config)
            .with_memory_provider(provider).with_tools([inventory_lookup, create_customer])
            .build()
        )  # fmt: skip
        ledger = provider.ledger

        def runs(prompt: str) -> list[float]:
            times = []
            for _ in range(args.runs):
                started = time.perf_counter()
                assert agent.run(prompt).status == "completed"
                times.append((time.perf_counter() - started) * 1000)
            return times

        baseline = runs("stock?")
        ledger.apply_policy(_policy(1000), reason="bench")
        with_rules = runs("stock?")
        allowed = runs("Create Ada")
        facts = CallFacts(tool="inventory_lookup", arguments={"sku": "A-100"}, read_only=True)
        decide = []
        for _ in range(args.runs * 5):
            started = time.perf_counter()
            ledger.decide_call(facts, schema_hash=inventory_lookup.schema_hash, grantable=True)
            decide.append((time.perf_counter() - started) * 1000)
    base = statistics.median(baseline)
    print(f"read-only call, no policy stored            {_ms(baseline)}")
    print(f"read-only call, 1,000 rules stored          {_ms(with_rules)}  "
          f"({statistics.median(with_rules) / base:.2f}x)")  # fmt: skip
    print(f"side-effecting call allowed by a rule       {_ms(allowed)}  "
          f"({statistics.median(allowed) / base:.2f}x; recorded, claimed, completed)")  # fmt: skip
    print(f"decide_call alone, 1,000 rules              {_ms(decide)}")


if __name__ == "__main__":
    main()
