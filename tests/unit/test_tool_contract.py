"""Both kinds of tool implement the one tool contract and refuse an unapproved call alike."""

from __future__ import annotations

from typing import Any

from supervisor.mcp.config import McpServerConfig
from supervisor.mcp.connection import McpCallResult, McpToolSpec
from supervisor.mcp.tool import McpTool
from supervisor.tools import ToolRegistry, governed_tool
from supervisor.tools.contract import Tool, ToolCallResult
from supervisor.tools.dispatch import FunctionTool
from supervisor.tools.governed import GovernedTool

# mypy checks these assignments member by member: a member that goes missing or changes type
# in either implementation fails `make types`, before any test runs.
GOVERNED_IMPLEMENTS_TOOL: type[Tool] = GovernedTool
GOVERNED_IMPLEMENTS_FUNCTION_TOOL: type[FunctionTool] = GovernedTool
MCP_IMPLEMENTS_TOOL: type[Tool] = McpTool

_SCHEMA = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}


class _Server:
    """A caller that records every call and lists one unchanged tool."""

    def __init__(self, spec: McpToolSpec) -> None:
        self.spec = spec
        self.calls: list[dict[str, Any]] = []

    def list_tools(self) -> list[McpToolSpec]:
        return [self.spec]

    def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> McpCallResult:
        self.calls.append(arguments)
        return McpCallResult({"ordered": arguments["sku"]}, (), (), False)


def _mcp_tool() -> tuple[McpTool, _Server]:
    spec = McpToolSpec("create_order", "Create an order.", _SCHEMA, False)
    server = _Server(spec)
    return McpTool(server, McpServerConfig(name="inv", command=("unused",)), spec), server


@governed_tool(side_effects=True, approval_reason="it creates an order")
def create_order(sku: str) -> dict[str, str]:
    """Create an order."""
    return {"ordered": sku}


def _refusal_body(result: ToolCallResult) -> dict[str, Any]:
    assert result.error is not None
    return {"code": result.error.code, "arguments": result.arguments}


def test_both_tools_satisfy_the_contract_at_run_time() -> None:
    mcp_tool, _ = _mcp_tool()
    assert isinstance(create_order, Tool)
    assert isinstance(mcp_tool, Tool)
    assert not isinstance(create_order.function, Tool)


def test_an_unapproved_call_gets_the_same_refusal_from_either_tool() -> None:
    mcp_tool, server = _mcp_tool()
    tools: list[Tool] = [create_order, mcp_tool]
    for tool in tools:
        result = tool.dispatch({"sku": "A-1"})
        assert _refusal_body(result) == {"code": "approval_required", "arguments": {"sku": "A-1"}}
        assert result.value["error"]["message"].startswith(
            f"{tool.name} requires human approval before it runs ("
        )
        assert result.outcome.reason_code == "approval_required"
    assert server.calls == []


async def test_an_approved_call_runs_through_either_tool() -> None:
    mcp_tool, server = _mcp_tool()
    tools: list[Tool] = [create_order, mcp_tool]
    for tool in tools:
        prepared = tool.prepare('{"sku": "B-2"}')
        assert prepared.arguments == {"sku": "B-2"}
        assert tool.execute(prepared, approved=True).value == {"ordered": "B-2"}
        assert (await tool.adispatch({"sku": "C-3"}, approved=True)).value == {"ordered": "C-3"}
    assert server.calls == [{"sku": "B-2"}, {"sku": "C-3"}]


def test_the_registry_keeps_an_mcp_tool_as_it_is() -> None:
    mcp_tool, _ = _mcp_tool()
    registry = ToolRegistry([mcp_tool, create_order])
    assert registry.get("inv__create_order") is mcp_tool
    assert registry.get("create_order") is create_order
