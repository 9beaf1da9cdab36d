"""Per-agent policies: what the model sees each turn, and how large results are handled."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from supervisor.errors import PolicyError


class ContextPolicy(BaseModel):
    """What the model is shown and allowed each turn.

    Attributes:
        tool_top_k: With a toolbox attached, how many tool schemas the router reveals per turn
            (besides the discovery and invocation meta-tools).
        always_visible_tools: Tool names revealed every turn (they count toward ``tool_top_k``
            only if also ranked).
        semantic_routing: With a toolbox attached, fuse its lexical ranking with the bundled
            embedding model of ``agent-supervisor[semantic]`` (the model loads on the first
            turn; without the extra, building or loading the agent raises
            ``SemanticExtraMissing``). Saved with the agent, so ``MemAgent.load`` ranks the same.
        allowed_tools: If set, only these tool names are ever revealed or invocable.
        denied_tools: Never revealed nor invocable (beats ``allowed_tools``).
        allowed_domains: If set, only tools in one of these domains are revealed or invocable.
        approval_ttl_seconds: How long a proposal stays decidable.
        max_tool_calls_per_turn: Calls beyond this in one model turn are refused unrun, all
            of them with one refusal, one outcome and one trace event (each id still gets a
            minimal answer, as the protocol needs).
        max_attempts_per_call: Identical calls (same tool, same arguments) beyond this in one
            run are refused unrun, so a looping model cannot hammer a tool.
        max_model_turns: Model round trips per run before the run stops as ``limit_reached``.
        max_result_chars: The longest tool result (JSON text) that reaches the model inline.
            A longer one is offloaded as a pointer when a ``ToolResultPolicy`` is set, and
            otherwise replaced by a ``result_too_large`` error: it never reaches the model or
            a checkpoint whole.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_top_k: int = Field(default=8, ge=1, le=128)
    always_visible_tools: tuple[str, ...] = ()
    semantic_routing: bool = False
    allowed_tools: tuple[str, ...] | None = None
    denied_tools: tuple[str, ...] = ()
    allowed_domains: tuple[str, ...] | None = None
    approval_ttl_seconds: int = Field(default=3600, ge=1, le=30 * 24 * 3600)
    max_tool_calls_per_turn: int = Field(default=16, ge=1, le=256)
    max_attempts_per_call: int = Field(default=3, ge=1, le=100)
    max_model_turns: int = Field(default=24, ge=1, le=1000)
    max_result_chars: int = Field(default=100_000, ge=1_000, le=10_000_000)

    def permits(self, tool_name: str, domains: tuple[str, ...]) -> bool:
        """Whether a tool is in scope: allowlists and domains are applied before any ranking."""
        if tool_name in self.denied_tools:
            return False
        if self.allowed_tools is not None and tool_name not in self.allowed_tools:
            return False
        if self.allowed_domains is not None:
            return any(domain in self.allowed_domains for domain in domains)
        return True


class ToolResultPolicy(BaseModel):
    """How large tool results reach the model.

    Attributes:
        offload_above_chars: Results whose JSON text is longer are stored once as a blob and the
            model receives an auditable pointer instead.
        preview_chars: Length of the preview inside a pointer.
        max_identifiers: How many identifiers (ids, URLs, keys) a pointer lists.
        expansion_page_chars: Default page size of the expansion tool.
        expansion_max_page_chars: The largest page the expansion tool returns, so its own
            results stay bounded and are never offloaded again.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    offload_above_chars: int = Field(default=8_000, ge=256)
    preview_chars: int = Field(default=600, ge=0, le=8_000)
    max_identifiers: int = Field(default=20, ge=0, le=200)
    expansion_page_chars: int = Field(default=4_000, ge=256)
    expansion_max_page_chars: int = Field(default=8_000, ge=256)

    @model_validator(mode="after")
    def _check_pages(self) -> Self:
        if self.expansion_page_chars > self.expansion_max_page_chars:
            raise PolicyError(
                "expansion_page_chars is larger than expansion_max_page_chars.",
                hint="Make the default page at most the maximum page.",
            )
        return self
