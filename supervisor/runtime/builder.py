"""``MemAgentBuilder``: the seed's fluent way to configure and build a :class:`MemAgent`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Self

from supervisor.runtime.agent import MemAgent
from supervisor.runtime.config import AgentConfig, LLMConfig, ToolReference
from supervisor.runtime.policies import ContextPolicy, ToolResultPolicy
from supervisor.store.provider import SQLModelProvider
from supervisor.tools.registry import ToolRegistry

_DEFAULT_LLM: dict[str, Any] = {"provider": "openai", "model": "gpt-4o-mini"}


def _slug(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:48] or "default-agent"


class MemAgentBuilder:
    """Configure an agent step by step, then ``build()`` or ``build_and_save()``.

    Defaults: the embedded ledger (``SQLModelProvider()``), the model endpoint and key from
    ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, the default :class:`ContextPolicy`, no offloading.
    """

    def __init__(self) -> None:
        self._name: str | None = None
        self._agent_id: str | None = None
        self._instructions = ""
        self._llm: dict[str, Any] = dict(_DEFAULT_LLM)
        self._tools: list[Any] = []
        self._toolbox: Any = None
        self._context_policy = ContextPolicy()
        self._result_policy: ToolResultPolicy | None = None
        self._provider: SQLModelProvider | None = None
        self._allowlist: list[str] = []
        self._cache = False
        self._cache_similarity = 0.95
        self._embedder: Any = None
        self._mcp_servers: list[Any] = []

    def with_name(self, name: str) -> Self:
        """The agent's name; its id defaults to a slug of it."""
        self._name = name
        return self

    def with_agent_id(self, agent_id: str) -> Self:
        """An explicit, stable agent id (what ``MemAgent.load`` takes)."""
        self._agent_id = agent_id
        return self

    def with_instructions(self, instructions: str) -> Self:
        """The system message."""
        self._instructions = instructions
        return self

    def with_llm_config(self, config: dict[str, Any]) -> Self:
        """``{"provider": "openai", "model": ..., "base_url", "api_key", "temperature",
        "timeout", "max_retries"}``; validated now, so mistakes surface at build time."""
        LLMConfig.from_mapping(config)
        self._llm = dict(config)
        return self

    def with_tools(self, tools: Iterable[Callable[..., Any]]) -> Self:
        """Governed tools (plain functions get governed_tool's read-only defaults)."""
        self._tools.extend(tools)
        return self

    def with_toolbox(self, toolbox: Any) -> Self:
        """Attach a :class:`~supervisor.toolbox.Toolbox` for scoped top-k disclosure.

        A toolbox built with an embedder ranks hybrid; the saved policy then says
        ``semantic_routing=True``, so ``MemAgent.load`` ranks hybrid too. Or set
        ``ContextPolicy(semantic_routing=True)`` to have the bundled model attached.
        """
        self._toolbox = toolbox
        return self

    def with_context_policy(self, policy: ContextPolicy) -> Self:
        """Limits and scope for what the model sees and calls."""
        self._context_policy = policy
        return self

    def with_tool_result_policy(self, policy: ToolResultPolicy) -> Self:
        """Offload large results as auditable pointers."""
        self._result_policy = policy
        return self

    def with_memory_provider(self, provider: SQLModelProvider) -> Self:
        """The ledger to use (default: the embedded SQLite ledger)."""
        self._provider = provider
        return self

    def with_semantic_cache(
        self, enabled: bool = True, *, embedder: Any = None, similarity: float = 0.95
    ) -> Self:
        """Replay answers to repeated questions; only clean, read-only runs are admitted
        (see :mod:`supervisor.runtime.cache`). ``embedder`` adds similarity hits."""
        self._cache = enabled
        self._embedder = embedder
        self._cache_similarity = similarity
        return self

    def with_allowlist(self, references: Iterable[str]) -> Self:
        """Import references (``module:qualname`` or ``module:*``) that may be rebound."""
        self._allowlist.extend(references)
        return self

    def with_mcp_server(
        self,
        name: str,
        *,
        command: Sequence[str] | None = None,
        url: str | None = None,
        trust: Literal["untrusted", "trusted"] = "untrusted",
        env: Mapping[str, str] | None = None,
        timeout_seconds: float = 30.0,
    ) -> Self:
        """Expose an MCP server's tools as governed tools named ``<name>__<tool>``.

        At build the server is connected (stdio ``command`` or streamable HTTP ``url``) and
        listed. A tool is mutating, so every call needs approval, unless ``trust="trusted"``
        and the tool is annotated ``readOnlyHint`` (see :mod:`supervisor.mcp`).

        Raises:
            pydantic.ValidationError: bad name, or both/neither of ``command`` and ``url``.
        """
        from supervisor.mcp.config import McpServerConfig

        config = McpServerConfig(
            name=name, command=tuple(command) if command is not None else None, url=url,
            trust=trust, env=dict(env or {}), timeout_seconds=timeout_seconds,
        )  # fmt: skip
        self._mcp_servers.append(config)
        return self

    def build(self) -> MemAgent:
        """Build the agent in this process (nothing is saved)."""
        provider = self._provider or SQLModelProvider()
        registry = ToolRegistry(allowlist=self._allowlist)
        if self._toolbox is not None:
            for tool in self._toolbox:
                registry.register(tool)
        for tool in self._tools:
            registry.register(tool)
        # A stable default id: an unnamed agent rebuilt in another process finds its proposals.
        agent_id = self._agent_id or _slug(self._name or "default agent")
        if self._mcp_servers:
            from supervisor.mcp.factory import mcp_tools

            for mcp_tool in mcp_tools(self._mcp_servers, ledger=provider.ledger, agent_id=agent_id):
                registry.register(mcp_tool)
        name = self._name or "agent"
        llm = dict(self._llm)
        api_key = llm.pop("api_key", None)
        base_url = llm.get("base_url")  # with its credentials, for this process only
        config = AgentConfig(
            agent_id=agent_id,
            name=name,
            instructions=self._instructions,
            llm=LLMConfig.from_mapping(llm).saved(),
            tools=tuple(
                ToolReference(
                    name=tool.name, import_ref=tool.import_ref, schema_hash=tool.schema_hash
                )
                for tool in registry
            ),
            context_policy=self._saved_policy(),
            tool_result_policy=self._result_policy,
            toolbox_agent_id=getattr(self._toolbox, "agent_id", None),
            semantic_cache=self._cache,
            cache_similarity=self._cache_similarity,
        )
        return MemAgent.from_config(
            config, provider, registry, api_key=api_key, toolbox=self._toolbox,
            embedder=self._embedder, base_url=base_url,
        )  # fmt: skip

    def _saved_policy(self) -> ContextPolicy:
        """The context policy to save: a toolbox that ranks hybrid says so in it."""
        policy = self._context_policy
        if getattr(self._toolbox, "embedder", None) is not None and not policy.semantic_routing:
            policy = policy.model_copy(update={"semantic_routing": True})
        return policy

    def build_and_save(self) -> MemAgent:
        """Build, then save the configuration and tool registry for ``MemAgent.load``."""
        return self.build().save()
