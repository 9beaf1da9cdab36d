"""A real MCP server for the gate tests, written with the official ``mcp`` SDK (stdio).

    python tests/support/mcp_server.py            (stdio)
    python tests/support/mcp_server.py http PORT  (streamable HTTP on 127.0.0.1:PORT/mcp)

Tools:
- ``lookup(sku)``: annotated read-only; returns stock for a SKU.
- ``create_order(sku, quantity)``: mutating; appends one line per execution to
  ``$MCP_COUNT_FILE`` (with the ``supervisor/idempotency_key`` it received in ``_meta``).
- ``confirm_delete(path)``: mutating; asks the client to confirm through an elicitation and
  deletes (appends a ``deleted`` line) only if the elicitation is accepted.

``MCP_SCHEMA_VARIANT=2`` adds a ``priority`` parameter to ``create_order`` (a changed schema).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from mcp_types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("inventory-test", instructions="Test inventory server.")
VARIANT = os.environ.get("MCP_SCHEMA_VARIANT", "1")


def _record(line: dict[str, object]) -> None:
    path = Path(os.environ["MCP_COUNT_FILE"])
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _meta(ctx: Context) -> dict[str, object]:
    meta = ctx.request_context.meta
    return dict(meta) if meta else {}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(sku: str) -> dict[str, object]:
    """Return current stock for one SKU."""
    return {"sku": sku, "available": 12}


if VARIANT == "2":

    @server.tool(name="create_order")
    def create_order_v2(sku: str, quantity: int, priority: str, ctx: Context) -> dict[str, object]:
        """Create an order for a SKU."""
        key = _meta(ctx).get("supervisor/idempotency_key")
        _record({"tool": "create_order", "sku": sku, "quantity": quantity, "key": key})
        return {"order": f"order-{sku}-{quantity}", "priority": priority}

else:

    @server.tool(name="create_order")
    def create_order_v1(sku: str, quantity: int, ctx: Context) -> dict[str, object]:
        """Create an order for a SKU."""
        key = _meta(ctx).get("supervisor/idempotency_key")
        _record({"tool": "create_order", "sku": sku, "quantity": quantity, "key": key})
        return {"order": f"order-{sku}-{quantity}"}


class Confirmation(BaseModel):
    """What the server asks the client to confirm."""

    confirm: bool


def ask_to_confirm(path: str) -> Elicit[Confirmation]:
    """Ask the client (its user) to confirm the deletion."""
    return Elicit(f"Really delete {path}?", Confirmation)


@server.tool()
def confirm_delete(
    path: str, answer: Annotated[ElicitationResult[Confirmation], Resolve(ask_to_confirm)]
) -> dict[str, object]:
    """Delete a record after the user confirms."""
    if isinstance(answer, AcceptedElicitation) and answer.data.confirm:
        _record({"tool": "confirm_delete", "path": path, "deleted": True})
        return {"deleted": path}
    _record({"tool": "confirm_delete", "path": path, "deleted": False, "action": answer.action})
    return {"deleted": None, "elicitation": answer.action}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
