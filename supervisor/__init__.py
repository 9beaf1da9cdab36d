"""Agent Supervisor SDK: governed tools, durable human approval, structured outcomes.

Public names are loaded on first use, so ``import supervisor`` stays fast and pulls in none of
textual, openai, browser_use, e2b or mcp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.lazy import lazy_exports
from supervisor.version import __version__ as __version__

_EXPORTS: dict[str, str] = {
    "governed_tool": "supervisor.tools.governed",
    "GovernedTool": "supervisor.tools.governed",
    "Secret": "supervisor.tools.schema",
    "ToolRegistry": "supervisor.tools.registry",
    "ToolCallResult": "supervisor.tools.dispatch",
    "ToolCallError": "supervisor.tools.errors",
    "ToolPolicy": "supervisor.tools.policy",
    "ToolResult": "supervisor.outcomes",
    "ToolOutcome": "supervisor.outcomes",
    "ToolOutcomeStatus": "supervisor.outcomes",
    "infer_outcome": "supervisor.outcomes",
    "SupervisorError": "supervisor.errors",
    "canonical_json": "supervisor.canonical",
    "MemAgentBuilder": "supervisor.runtime.builder",
    "MemAgent": "supervisor.runtime.agent",
    "RunResult": "supervisor.runtime.results",
    "ApprovalResumeResult": "supervisor.runtime.results",
    "ContextPolicy": "supervisor.runtime.policies",
    "ToolResultPolicy": "supervisor.runtime.policies",
    "SQLModelProvider": "supervisor.store.provider",
    "Proposal": "supervisor.ledger.models",
    "ProposalStatus": "supervisor.ledger.models",
    "Toolbox": "supervisor.toolbox",
    "args_hash": "supervisor.canonical",
}

__all__ = [
    "ApprovalResumeResult",
    "ContextPolicy",
    "GovernedTool",
    "MemAgent",
    "MemAgentBuilder",
    "Proposal",
    "ProposalStatus",
    "RunResult",
    "SQLModelProvider",
    "Secret",
    "SupervisorError",
    "ToolCallError",
    "ToolCallResult",
    "ToolOutcome",
    "ToolOutcomeStatus",
    "ToolPolicy",
    "ToolRegistry",
    "ToolResult",
    "ToolResultPolicy",
    "Toolbox",
    "args_hash",
    "canonical_json",
    "governed_tool",
    "infer_outcome",
]

if TYPE_CHECKING:
    from supervisor.canonical import args_hash, canonical_json
    from supervisor.errors import SupervisorError
    from supervisor.ledger.models import Proposal, ProposalStatus
    from supervisor.outcomes import ToolOutcome, ToolOutcomeStatus, ToolResult, infer_outcome
    from supervisor.runtime.agent import MemAgent
    from supervisor.runtime.builder import MemAgentBuilder
    from supervisor.runtime.policies import ContextPolicy, ToolResultPolicy
    from supervisor.runtime.results import ApprovalResumeResult, RunResult
    from supervisor.store.provider import SQLModelProvider
    from supervisor.toolbox import Toolbox
    from supervisor.tools.dispatch import ToolCallResult
    from supervisor.tools.errors import ToolCallError
    from supervisor.tools.governed import GovernedTool, governed_tool
    from supervisor.tools.policy import ToolPolicy
    from supervisor.tools.registry import ToolRegistry
    from supervisor.tools.schema import Secret


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
