"""``RuntimeContext``: the parts of one agent that a run or a resume works with.

The engine, call resolution and resumes take this frozen bundle instead of the agent, so the
runtime's modules never call back into :class:`~supervisor.runtime.agent.MemAgent`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervisor.ledger.service import ApprovalLedger
from supervisor.runtime.config import AgentConfig
from supervisor.runtime.llm import ChatModel
from supervisor.runtime.policies import ContextPolicy
from supervisor.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from supervisor.runtime.cache import SemanticCache
    from supervisor.runtime.offload import ResultOffloader
    from supervisor.toolbox import Toolbox


@dataclass(frozen=True, slots=True)
class RuntimeContext:
    """One agent's configuration, ledger, tools and helpers.

    Attributes:
        config: The saved configuration (id, instructions, policies).
        ledger: Where proposals, checkpoints, blobs and traces go.
        tools: The live tool registry.
        model: The model endpoint.
        toolbox: The attached :class:`~supervisor.toolbox.Toolbox`, if any.
        offloader: Stores large results as pointers, if a result policy is set.
        cache: The semantic cache, if enabled.
    """

    config: AgentConfig
    ledger: ApprovalLedger
    tools: ToolRegistry
    model: ChatModel
    toolbox: Toolbox | None = None
    offloader: ResultOffloader | None = None
    cache: SemanticCache | None = None

    @property
    def agent_id(self) -> str:
        """Stable id of the agent in the ledger."""
        return self.config.agent_id

    @property
    def policy(self) -> ContextPolicy:
        """What the model is shown and allowed each turn."""
        return self.config.context_policy
