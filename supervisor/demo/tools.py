"""The seed's example tools, as the demo and the tests use them."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from supervisor.outcomes import ToolOutcome, ToolOutcomeStatus, ToolResult
from supervisor.tools.governed import governed_tool

_STOCK = {("A-100", "london"): 12, ("A-100", "new-york"): 3, ("B-200", "london"): 0}


@governed_tool(deterministic=True, domains=("inventory",))
def inventory_lookup(
    sku: str,
    warehouse: Literal["london", "new-york"] = "london",
) -> dict[str, Any]:
    """Return current inventory for one SKU and warehouse.

    Args:
        sku: Stock-keeping unit, e.g. "A-100".
        warehouse: Which warehouse to look in.
    """
    return {"sku": sku, "warehouse": warehouse, "available": _STOCK.get((sku, warehouse), 0)}


@governed_tool(
    deterministic=False,
    side_effects=True,
    requires_approval=True,
    approval_reason="Creates a customer in the production CRM",
    domains=("crm",),
)
def create_customer(name: str, email: str) -> dict[str, Any]:
    """Create one CRM customer after host approval.

    Args:
        name: Customer's full name.
        email: Customer's e-mail address.
    """
    digest = hashlib.sha256(f"{name}\n{email}".encode()).hexdigest()[:10]
    return {"customer_id": f"cus_{digest}", "name": name, "email": email}


@governed_tool(deterministic=True, domains=("inventory",))
def replica_inventory_lookup(sku: str) -> ToolResult[list[dict[str, Any]]]:
    """Look a SKU up on the replica after the primary timed out (a fallback outcome).

    Args:
        sku: Stock-keeping unit.
    """
    rows = [{"sku": sku, "warehouse": "london", "available": _STOCK.get((sku, "london"), 0)}]
    return ToolResult(
        rows,
        ToolOutcome(
            status=ToolOutcomeStatus.FALLBACK,
            reason_code="primary_timeout",
            primary_provider="primary_inventory",
            fallback_provider="inventory_replica",
            retryable=True,
            degraded=True,
            result_count=len(rows),
        ),
    )


@governed_tool(deterministic=True, domains=("reports",))
def export_stock_report(warehouse: Literal["london", "new-york"] = "london") -> dict[str, Any]:
    """Export the full stock report of a warehouse (a large result).

    Args:
        warehouse: Which warehouse.
    """
    rows = [
        {"sku": f"SKU-{index:05d}", "warehouse": warehouse, "available": index % 17}
        for index in range(2_000)
    ]
    return {"report_id": f"rep_{warehouse}_2026_12", "rows": rows}
