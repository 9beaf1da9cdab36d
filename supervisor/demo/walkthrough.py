"""The ``supervisor demo`` walk-through of governed dispatch."""

from __future__ import annotations

import json
from collections.abc import Callable

from supervisor.demo.tools import create_customer, inventory_lookup, replica_inventory_lookup

_CALLS = (
    (inventory_lookup, '{"sku": "A-100"}', "a valid call (default warehouse applied)"),
    (inventory_lookup, '{"sku": "A-100", "warehouse": "paris"}', "a value outside the enum"),
    (inventory_lookup, '{"sku": 123}', "a number where a string is declared"),
    (inventory_lookup, '{"sku": "A-100", "region": "eu"}', "an undeclared argument"),
    (inventory_lookup, '{"sku": "A-100", "approved": true}', "the model trying to approve"),
    (inventory_lookup, '{"sku": "A-100"', "malformed JSON"),
    (create_customer, '{"name": "Ada", "email": "ada@example.com"}', "a side effect"),
    (replica_inventory_lookup, '{"sku": "A-100"}', "a fallback outcome"),
)


def run_walkthrough(echo: Callable[[str], object]) -> None:
    """Print each demo call, what the model would receive, and the outcome evidence."""
    echo("Schema the model receives for inventory_lookup (OpenAI strict form):")
    echo(json.dumps(inventory_lookup.openai.definition, indent=2))
    for tool, arguments, label in _CALLS:
        result = tool.dispatch(arguments)
        echo(f"\n# {label}\n> {tool.name}({arguments})")
        echo(f"  model sees: {result.model_content()}")
        evidence = {
            key: value for key, value in result.evidence().items() if value not in (None, False)
        }
        echo(f"  outcome:    {json.dumps(evidence)}")
