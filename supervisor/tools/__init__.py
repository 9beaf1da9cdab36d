"""Governed tools: strict schemas, policies, dispatch and the registry."""

from __future__ import annotations

from supervisor.tools.contract import PreparedCall, Tool, ToolCallResult
from supervisor.tools.errors import ArgumentProblem, ToolCallError
from supervisor.tools.governed import GovernedTool, governed_tool
from supervisor.tools.policy import RESERVED_PARAMETER_NAMES, ToolPolicy
from supervisor.tools.registry import RegistryEntry, ToolRegistry, as_governed

__all__ = [
    "RESERVED_PARAMETER_NAMES",
    "ArgumentProblem",
    "GovernedTool",
    "PreparedCall",
    "RegistryEntry",
    "Tool",
    "ToolCallError",
    "ToolCallResult",
    "ToolPolicy",
    "ToolRegistry",
    "as_governed",
    "governed_tool",
]
