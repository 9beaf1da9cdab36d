"""MCP boundary: tools of MCP servers as governed tools behind a durable mutation gate.

Importing this package does not import the ``mcp`` SDK; connecting does (``mcp_tools``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from supervisor.mcp.config import McpServerConfig, Trust

if TYPE_CHECKING:
    from supervisor.mcp.factory import close_mcp_tools, mcp_server, mcp_tools
    from supervisor.mcp.tool import McpTool

_LAZY = {
    "mcp_tools": "supervisor.mcp.factory",
    "mcp_server": "supervisor.mcp.factory",
    "close_mcp_tools": "supervisor.mcp.factory",
    "McpTool": "supervisor.mcp.tool",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(module_name), name)


__all__ = ["McpServerConfig", "McpTool", "Trust", "close_mcp_tools", "mcp_server", "mcp_tools"]
