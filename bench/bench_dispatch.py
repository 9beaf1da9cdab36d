"""Governed dispatch vs a bare pydantic validate-then-call of the same function.

Both paths take the same JSON text a model would send. The governed path parses, validates
strictly, checks reserved and undeclared names, binds, calls, times the call, checks the result
is JSON data and classifies it (legacy inference; a plain success is the shared, frozen
``ToolOutcome()``) and returns a ToolCallResult holding value, outcome and latency; nothing is
computed lazily. The bare path validates with a plain pydantic model and calls the function.

Run: .venv/bin/python bench/bench_dispatch.py [--rounds 15] [--calls 20000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from supervisor.demo.tools import inventory_lookup

ARGUMENTS = '{"sku": "A-100", "warehouse": "new-york"}'
raw_function: Callable[..., dict[str, Any]] = inventory_lookup.function


class BareArguments(BaseModel):
    sku: str
    warehouse: Literal["london", "new-york"] = "london"


def bare_call() -> dict[str, Any]:
    validated = BareArguments.model_validate_json(ARGUMENTS)
    return raw_function(sku=validated.sku, warehouse=validated.warehouse)


def governed_call() -> Any:
    return inventory_lookup.dispatch(ARGUMENTS).value


def time_per_call(function: Callable[[], Any], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20_000)
    options = parser.parse_args()
    assert governed_call() == bare_call()
    result = inventory_lookup.dispatch(ARGUMENTS)
    assert result.ok and result.outcome.status == "success" and result.latency_ms is not None
    bare: list[float] = []
    governed: list[float] = []
    for _ in range(options.rounds):
        bare.append(time_per_call(bare_call, options.calls))
        governed.append(time_per_call(governed_call, options.calls))
    ratios = [g / b for g, b in zip(governed, bare, strict=True)]
    for label, times in (("bare pydantic validate+call", bare), ("governed dispatch", governed)):
        median, best = statistics.median(times), min(times)
        print(f"{label:28s} median {median:7.2f}  best {best:7.2f} us/call")
    print(
        f"ratio governed/bare          median of rounds {statistics.median(ratios):.2f}x, "
        f"best/best {min(governed) / min(bare):.2f}x (goal <= 2x)"
    )


if __name__ == "__main__":
    main()
