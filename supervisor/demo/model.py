"""The demo's model: a scripted OpenAI-compatible server that routes by the user's request."""

from __future__ import annotations

import json

from supervisor.testing import CallTools, RecordedRequest, Reply, ToolCall, Turn

#: scenario -> (user request, tool call the model makes)
#: How long the demo agents' proposals stay decidable (``supervisor demo --approval-ttl``).
APPROVAL_TTL_ENV = "SUPERVISOR_DEMO_APPROVAL_TTL"
DEMO_PARENT_ENV = "SUPERVISOR_DEMO_PARENT"
"""The pid of the demo that started an agent: the agent stops once that process is gone."""

SCENARIOS: dict[str, tuple[str, ToolCall]] = {
    "inventory": (
        "How many A-100 are in the London warehouse?",
        ToolCall("inventory_lookup", {"sku": "A-100", "warehouse": "london"}),
    ),
    "crm": (
        "Create the customer Ada Lovelace, ada@example.com.",
        ToolCall("create_customer", {"name": "Ada Lovelace", "email": "ada@example.com"}),
    ),
    "report": (
        "Export the full stock report.",
        ToolCall("export_stock_report", {"warehouse": "london"}),
    ),
    "sandbox": (
        "Compute 2 to the power of 100 in Python.",
        ToolCall("run_code", {"language": "python", "code": "print(2 ** 100)", "files": {}}),
    ),
    "fallback": (
        "Check A-100 even if the primary inventory is down.",
        ToolCall("replica_inventory_lookup", {"sku": "A-100"}),
    ),
}


def demo_turn(request: RecordedRequest) -> Turn:
    """Answer one chat request: call the scenario's tool, then summarise what came back."""
    last = request.messages[-1] if request.messages else {}
    if last.get("role") == "tool":
        content = str(last.get("content", ""))
        try:
            body = json.loads(content)
        except ValueError:
            body = content
        if isinstance(body, dict) and "error" in body:
            return Reply(f"The call did not go through: {body['error'].get('code')}.")
        if isinstance(body, dict) and isinstance(body.get("edited_by_human"), dict):
            changes = "; ".join(
                f"{change.get('path')}: {change.get('old')!r} -> {change.get('new')!r}"
                for change in body["edited_by_human"].get("changed", [])
            )
            result = json.dumps(body.get("result"), ensure_ascii=False)
            return Reply(f"Done as edited by a human ({changes}): {result[:160]}")
        if isinstance(body, dict) and "offloaded_result" in body:
            pointer = body["offloaded_result"]
            digest, size = pointer["digest"][:19], pointer["size_chars"]
            return Reply(f"The report is stored as {digest}… ({size} chars).")
        return Reply(f"Done: {content[:160]}")
    text = str(last.get("content", ""))
    for query, call in SCENARIOS.values():
        if text == query:
            return CallTools([call])
    return Reply("I can look up stock, create customers and export reports.")
