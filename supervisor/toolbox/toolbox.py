"""``Toolbox``: a scoped, deterministic router over many governed tools.

Each turn the runtime sends the model the two meta-tools and the strict schemas of
:meth:`Toolbox.select`'s top-k. Scope (policy allowlists, domains, user) is applied before any
ranking, so an out-of-scope tool is never scored, revealed, discovered nor resolvable by handle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from supervisor.errors import SupervisorError
from supervisor.runtime.policies import ContextPolicy
from supervisor.toolbox.embedding import Embedder, EmbeddingIndex, Fusion
from supervisor.toolbox.errors import ReservedToolName, ToolOutOfScope, UnknownToolHandle
from supervisor.toolbox.lexical import DEFAULT_SYNONYMS, LexicalIndex
from supervisor.toolbox.meta import MAX_DISCOVER_LIMIT, META_TOOL_NAMES, meta_tool_definitions
from supervisor.toolbox.registry_rows import (
    is_active,
    record_users,
    retire_record,
    sync_records,
    tool_handle,
    tool_record,
)
from supervisor.toolbox.selection import RankedTool, Selection
from supervisor.toolbox.text import SearchText, search_text
from supervisor.tools.contract import Tool
from supervisor.tools.registry import ToolRegistry, as_governed

if TYPE_CHECKING:
    from supervisor.store.provider import SQLModelProvider

ToolLike = Tool | Callable[..., Any]

_SCOPE_CACHE_SIZE = 64


@dataclass(frozen=True)
class ToolEntry:
    """A tool in the toolbox with its handle, user scope and indexed text."""

    handle: str
    tool: Tool
    users: frozenset[str] | None
    text: SearchText


class Toolbox:
    """Governed tools behind stable handles, ranked per query within a policy's scope.

    Args:
        agent_id: The owning agent (part of every handle).
        memory_provider: Where the tool registry is kept; ``None`` keeps it in memory only.
        augment: Also index each tool's full docstring (no model is asked).
        embedder: Optional embedding backend, fused with the lexical ranker (the bundled model:
            ``supervisor.toolbox.semantic.default_embedder()``, from
            ``agent-supervisor[semantic]``).
        synonyms: The lexical ranker's synonym table (``None`` disables it).
        fusion: How the two rankings are fused when an embedder is attached.
    """

    def __init__(
        self,
        agent_id: str,
        *,
        memory_provider: SQLModelProvider | None = None,
        augment: bool = False,
        embedder: Embedder | None = None,
        synonyms: Mapping[str, tuple[str, ...]] | None = DEFAULT_SYNONYMS,
        fusion: Fusion | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.fusion = fusion or Fusion()
        self.memory_provider = memory_provider
        self.augment = augment
        self._lexical = LexicalIndex(synonyms=synonyms)
        self._embedding = EmbeddingIndex(embedder) if embedder is not None else None
        self._by_handle: dict[str, ToolEntry] = {}
        self._by_name: dict[str, ToolEntry] = {}
        self._scope_cache: dict[tuple[Any, ...], frozenset[str] | None] = {}
        self._has_user_scopes = False

    # construction -------------------------------------------------------------------------
    @classmethod
    def from_functions(
        cls,
        functions: Iterable[ToolLike],
        *,
        memory_provider: SQLModelProvider | None = None,
        agent_id: str = "default",
        augment: bool = False,
        embedder: Embedder | None = None,
        user_id: str | None = None,
        fusion: Fusion | None = None,
    ) -> Toolbox:
        """Build a toolbox and register it in the ledger's tool registry (idempotently).

        Args:
            functions: Governed tools or plain functions (governed with defaults).
            memory_provider: Ledger to keep the registry in; ``None`` keeps it in memory.
            agent_id: The owning agent.
            augment: Also index each tool's full docstring.
            embedder: Optional embedding backend (e.g. ``default_embedder()``).
            user_id: Restrict these tools to one user (``None``: every user of the agent).
            fusion: How lexical and embedding rankings are fused.

        Returns:
            The toolbox.

        Raises:
            ReservedToolName: a tool is named like a meta-tool.
            ToolDefinitionError, PolicyError: a plain function cannot be governed.
        """
        toolbox = cls(
            agent_id,
            memory_provider=memory_provider,
            augment=augment,
            embedder=embedder,
            fusion=fusion,
        )
        toolbox.add(functions, user_id=user_id)
        return toolbox

    @classmethod
    def load(
        cls,
        memory_provider: SQLModelProvider,
        agent_id: str,
        registry_or_tools: ToolRegistry | Iterable[ToolLike],
        *,
        augment: bool = False,
        embedder: Embedder | None = None,
        missing: Literal["raise", "skip"] = "raise",
        fusion: Fusion | None = None,
    ) -> Toolbox:
        """Rebuild an agent's toolbox from its ledger records and live tools.

        Each active record is rebound by name from the given live tools, or else through the
        registry's allowlisted import reference with the recorded schema hash; stored text is
        never executed.

        Args:
            memory_provider: The ledger holding the records.
            agent_id: Whose toolbox to load.
            registry_or_tools: A :class:`ToolRegistry` (with its allowlist) or live tools.
            augment: Also index each tool's full docstring.
            embedder: Optional embedding backend.
            missing: ``skip`` leaves out records that cannot be rebound instead of raising.
            fusion: How lexical and embedding rankings are fused.

        Returns:
            The toolbox, attached to ``memory_provider``.

        Raises:
            UnknownToolError, ReferenceNotAllowed, ReferenceMismatch: a record cannot be rebound
                (only when ``missing="raise"``).
        """
        registry = (
            registry_or_tools
            if isinstance(registry_or_tools, ToolRegistry)
            else ToolRegistry(registry_or_tools)
        )
        toolbox = cls(
            agent_id,
            memory_provider=memory_provider,
            augment=augment,
            embedder=embedder,
            fusion=fusion,
        )
        bound: list[tuple[Tool, frozenset[str] | None]] = []
        for record in memory_provider.ledger.list_tools(agent_id):
            if not is_active(record):
                continue
            try:
                tool = registry.rebind(record.name, record.import_ref, record.schema_hash)
            except SupervisorError:
                if missing == "skip":
                    continue
                raise
            bound.append((tool, record_users(record)))
        for tool, users in bound:
            toolbox._index([tool], users)
        return toolbox

    def add(self, tools: Iterable[ToolLike], *, user_id: str | None = None) -> list[str]:
        """Add tools (incrementally indexed) and upsert their records by handle.

        Re-adding a tool with the same contract is a no-op; a changed contract replaces the old
        entry (new handle; the old record is kept, marked inactive).

        Args:
            tools: Governed tools or plain functions.
            user_id: Restrict these tools to one user (``None``: every user).

        Returns:
            The tools' handles, in order.

        Raises:
            ReservedToolName: a tool is named like a meta-tool.
        """
        governed = [as_governed(tool) for tool in tools]
        for tool in governed:
            if tool.name in META_TOOL_NAMES:
                raise ReservedToolName(
                    f"Tool name {tool.name!r} is reserved for the toolbox's meta-tools.",
                    hint="Rename the tool (governed_tool(name=...)).",
                    tool=tool.name,
                )
        users = frozenset({user_id}) if user_id is not None else None
        handles = self._index(governed, users)
        if self.memory_provider is not None:
            records = [
                tool_record(self.agent_id, entry.handle, entry.tool, entry.users)
                for entry in self._by_handle.values()
            ]
            sync_records(self.memory_provider.ledger, self.agent_id, records)
        return handles

    def _index(self, tools: list[Tool], users: frozenset[str] | None) -> list[str]:
        handles: list[str] = []
        to_embed: list[tuple[str, str]] = []
        for tool in tools:
            handle = tool_handle(self.agent_id, tool.name, tool.schema_hash)
            handles.append(handle)
            previous = self._by_name.get(tool.name)
            if previous is not None and previous.handle == handle and previous.users == users:
                self._by_handle[handle] = self._by_name[tool.name] = ToolEntry(
                    handle, tool, users, previous.text
                )
                continue
            if previous is not None:
                self._drop(previous)
            entry = ToolEntry(handle, tool, users, search_text(tool, augment=self.augment))
            self._by_handle[handle] = self._by_name[tool.name] = entry
            self._lexical.add(handle, entry.text.weighted_terms())
            to_embed.append((handle, entry.text.as_document()))
            self._has_user_scopes = self._has_user_scopes or users is not None
        if self._embedding is not None:
            self._embedding.add_many(to_embed)
        self._scope_cache.clear()
        return handles

    def _drop(self, entry: ToolEntry) -> None:
        del self._by_handle[entry.handle]
        del self._by_name[entry.tool.name]
        self._lexical.remove(entry.handle)
        if self._embedding is not None:
            self._embedding.remove(entry.handle)
        self._scope_cache.clear()

    def remove(self, name_or_handle: str) -> None:
        """Remove a tool (by name or handle); its ledger record is marked inactive.

        Raises:
            UnknownToolHandle: no such tool in this toolbox.
        """
        entry = self._by_handle.get(name_or_handle) or self._by_name.get(name_or_handle)
        if entry is None:
            raise UnknownToolHandle(f"No tool {name_or_handle!r} in this toolbox.")
        self._drop(entry)
        if self.memory_provider is not None:
            retire_record(self.memory_provider.ledger, self.agent_id, entry.handle)

    # inspection ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._by_handle)

    def __contains__(self, name_or_handle: object) -> bool:
        return name_or_handle in self._by_handle or name_or_handle in self._by_name

    def __iter__(self) -> Iterator[Tool]:
        return (entry.tool for entry in self._by_name.values())

    def handles(self) -> dict[str, str]:
        """Tool name -> handle."""
        return {name: entry.handle for name, entry in self._by_name.items()}

    def handle_for(self, name: str) -> str:
        """The handle of the tool named ``name``.

        Raises:
            UnknownToolHandle: no tool of that name.
        """
        entry = self._by_name.get(name)
        if entry is None:
            raise UnknownToolHandle(f"No tool named {name!r} in this toolbox.")
        return entry.handle

    @property
    def embedder(self) -> Embedder | None:
        """The attached embedding backend (``None``: lexical ranking only)."""
        return self._embedding.embedder if self._embedding is not None else None

    def attach_embedder(self, embedder: Embedder) -> None:
        """Rank hybrid from now on: embed every tool already here with ``embedder``.

        What ``ContextPolicy(semantic_routing=True)`` does to an agent's lexical toolbox. An
        embedder already attached is replaced.

        Args:
            embedder: The embedding backend (e.g. ``default_embedder()``).
        """
        index = EmbeddingIndex(embedder)
        index.add_many(
            [(entry.handle, entry.text.as_document()) for entry in self._by_handle.values()]
        )
        self._embedding = index

    @property
    def backend(self) -> str:
        """``lexical`` or ``lexical+embedding``."""
        return "lexical" if self._embedding is None else "lexical+embedding"

    # scope --------------------------------------------------------------------------------
    def _in_scope(self, entry: ToolEntry, policy: ContextPolicy, user_id: str | None) -> bool:
        if entry.users is not None and user_id not in entry.users:
            return False
        return policy.permits(entry.tool.name, entry.tool.policy.domains)

    def _allowed(self, policy: ContextPolicy, user_id: str | None) -> frozenset[str] | None:
        """Handles in scope (``None``: all of them), cached per scope until the toolbox changes."""
        unrestricted = (
            policy.allowed_tools is None
            and not policy.denied_tools
            and policy.allowed_domains is None
            and not self._has_user_scopes
        )
        if unrestricted:
            return None
        key = (policy.allowed_tools, policy.denied_tools, policy.allowed_domains, user_id)
        if key in self._scope_cache:
            return self._scope_cache[key]
        allowed = frozenset(
            handle
            for handle, entry in self._by_handle.items()
            if self._in_scope(entry, policy, user_id)
        )
        if len(self._scope_cache) >= _SCOPE_CACHE_SIZE:
            self._scope_cache.clear()
        self._scope_cache[key] = allowed
        return allowed

    def scope(self, policy: ContextPolicy, user_id: str | None = None) -> tuple[str, ...]:
        """The handles a caller with this policy and user may use, sorted.

        Everything the model can reach through this toolbox for that caller; the semantic
        cache keys answers by it, so an answer is never replayed to a caller with another scope.
        """
        allowed = self._allowed(policy, user_id)
        return tuple(sorted(self._by_handle if allowed is None else allowed))

    # ranking ------------------------------------------------------------------------------
    def rank(
        self, query: str, policy: ContextPolicy, *, limit: int, user_id: str | None = None
    ) -> list[tuple[str, float]]:
        """In-scope ``(handle, score)`` pairs for ``query``, best first, ties by handle.

        Args:
            query: Free text.
            policy: Scope (allowlists and domains) applied before ranking.
            limit: How many to return.
            user_id: The current user (tools scoped to other users are out of scope).

        Returns:
            At most ``limit`` pairs; tools matching nothing are not returned.
        """
        allowed = self._allowed(policy, user_id)
        if allowed is not None and not allowed:
            return []
        if self._embedding is None:
            return self._lexical.search(query, allowed=allowed, limit=limit)
        depth = max(limit, self.fusion.depth)
        lexical = self._lexical.search(query, allowed=allowed, limit=depth)
        semantic = self._embedding.search(query, allowed=allowed, limit=depth)
        return self.fusion.fuse(lexical, semantic, limit)

    def select(self, query: str, policy: ContextPolicy, *, user_id: str | None = None) -> Selection:
        """The tools to reveal this turn: top ``policy.tool_top_k`` plus always-visible ones.

        Args:
            query: What to rank against (e.g. the latest user message).
            policy: The agent's context policy.
            user_id: The current user.

        Returns:
            A :class:`Selection`; always-visible tools appear only if in scope.
        """
        ranked = tuple(
            RankedTool(self._by_handle[handle].tool, handle, score)
            for handle, score in self.rank(query, policy, limit=policy.tool_top_k, user_id=user_id)
        )
        shown = {entry.handle for entry in ranked}
        extra: list[RankedTool] = []
        for name in policy.always_visible_tools:
            entry = self._by_name.get(name)
            if entry is None or entry.handle in shown:
                continue
            if self._in_scope(entry, policy, user_id):
                extra.append(RankedTool(entry.tool, entry.handle, 0.0, "always_visible"))
                shown.add(entry.handle)
        return Selection(query, ranked, tuple(extra), policy.tool_top_k, self.backend)

    def discover(
        self,
        query: str,
        policy: ContextPolicy,
        limit: int = MAX_DISCOVER_LIMIT,
        *,
        user_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """What ``discover_tools`` returns to the model: in-scope tools only.

        Args:
            query: The model's search text.
            policy: The agent's context policy.
            limit: How many (clamped to 1..20).
            user_id: The current user.

        Returns:
            JSON-ready dicts with handle, name, description, domains, requires_approval and
            parameters (the strict schema the model should follow).
        """
        limit = max(1, min(MAX_DISCOVER_LIMIT, limit))
        found = self.rank(query, policy, limit=limit, user_id=user_id)
        return [self._describe(self._by_handle[handle]) for handle, _ in found]

    @staticmethod
    def _describe(entry: ToolEntry) -> dict[str, Any]:
        tool = entry.tool
        return {
            "handle": entry.handle,
            "name": tool.name,
            "description": tool.description,
            "domains": list(tool.policy.domains),
            "requires_approval": tool.policy.requires_approval,
            "parameters": tool.openai.definition["function"]["parameters"],
        }

    def resolve_handle(
        self, handle: str, policy: ContextPolicy, user_id: str | None = None
    ) -> Tool:
        """The governed tool behind a handle, if the caller's scope admits it.

        Args:
            handle: A handle the model sent.
            policy: The agent's context policy.
            user_id: The current user.

        Returns:
            The tool; dispatch it through the normal governed pipeline.

        Raises:
            UnknownToolHandle: no tool has that handle.
            ToolOutOfScope: the tool exists but is outside the policy or user scope.
        """
        entry = self._by_handle.get(handle)
        if entry is None:
            raise UnknownToolHandle(
                f"No tool has the handle {handle!r}.",
                hint="Use a handle returned by discover_tools in this conversation.",
                handle=handle,
            )
        if not self._in_scope(entry, policy, user_id):
            raise ToolOutOfScope(
                f"The tool with handle {handle!r} is not available to this agent or user.",
                hint="Use discover_tools to find a tool you may call.",
                tool_name=entry.tool.name,
                handle=handle,
            )
        return entry.tool

    def resolve_name(self, name: str, policy: ContextPolicy, user_id: str | None = None) -> Tool:
        """Like :meth:`resolve_handle`, for a revealed tool the model called by name.

        Raises:
            UnknownToolHandle, ToolOutOfScope: see :meth:`resolve_handle`.
        """
        entry = self._by_name.get(name)
        if entry is None:
            raise UnknownToolHandle(
                f"No tool named {name!r} is available.", hint="Use discover_tools.", tool=name
            )
        return self.resolve_handle(entry.handle, policy, user_id)

    @staticmethod
    def meta_tool_definitions() -> list[dict[str, Any]]:
        """The ``discover_tools`` and ``invoke_tool`` OpenAI function definitions (strict)."""
        return meta_tool_definitions()
