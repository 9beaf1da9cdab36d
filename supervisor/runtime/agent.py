"""``MemAgent``: an agent over any OpenAI-compatible endpoint with governed, durable tools.

The agent is the seed's public API over a :class:`~supervisor.runtime.context.RuntimeContext`;
runs, resumes and call handling live in the runtime's modules and take that context.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from supervisor.ledger.models import ApproverContext, Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.runtime import resume as _resume
from supervisor.runtime.cache import SemanticCache
from supervisor.runtime.config import AgentConfig, LLMConfig
from supervisor.runtime.context import RuntimeContext
from supervisor.runtime.errors import AgentNotFound
from supervisor.runtime.llm import ChatModel
from supervisor.runtime.offload import ResultOffloader, expansion_tools
from supervisor.runtime.results import ApprovalResumeResult, RunResult
from supervisor.runtime.run import new_thread_history, start_run, thread_history
from supervisor.store.provider import SQLModelProvider
from supervisor.store.urls import APP_NAME, sqlite_path
from supervisor.toolbox import Toolbox
from supervisor.tools.registry import ToolRegistry


def tool_vector_dir(ledger_url: str) -> Path | None:
    """Where the bundled model's tool vectors are kept for agents on ``ledger_url``: an
    ``embeddings`` folder beside a SQLite ledger file, this user's cache folder for a server
    ledger, nowhere for an in-memory ledger."""
    path = sqlite_path(ledger_url)
    if path is not None:
        return path.parent / "embeddings"
    if ledger_url.startswith("sqlite"):
        return None
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME)) / "embeddings"


class MemAgent:
    """An agent whose tool calls are governed and whose approvals are durable.

    Build one with :class:`~supervisor.runtime.builder.MemAgentBuilder`, or re-create a saved
    one in any process with :meth:`load`.
    """

    def __init__(self, context: RuntimeContext, provider: SQLModelProvider) -> None:
        self.context = context
        self.provider = provider
        # The last run's outcome records as plain JSON-ready dicts, as the seed documents them.
        self.last_tool_outcomes: list[dict[str, Any]] = []

    @classmethod
    def from_config(
        cls,
        config: AgentConfig,
        provider: SQLModelProvider,
        registry: ToolRegistry,
        *,
        api_key: str | None = None,
        toolbox: Any = None,
        embedder: Any = None,
        base_url: str | None = None,
        toolbox_embedder: Any = None,
    ) -> MemAgent:
        """Wire an agent from its configuration (shared by the builder and :meth:`load`).

        ``api_key`` and ``base_url`` (with any credentials it carries) live in this process only:
        ``config`` holds the saved form, without them. ``embedder`` is the semantic cache's;
        ``toolbox_embedder`` ranks the toolbox when the policy asks for semantic routing
        (``None``: the bundled model).

        Raises:
            SemanticExtraMissing: the policy asks for semantic routing, no embedder is given
                and ``agent-supervisor[semantic]`` is not installed.
        """
        live = {"api_key": api_key, "base_url": base_url}  # credentials: memory only, never saved
        llm = LLMConfig.from_mapping(
            {**config.llm, **{key: value for key, value in live.items() if value is not None}}
        )
        provider.trace_secrets.add(*llm.secret_values())
        offloader = None
        if config.tool_result_policy is not None:
            offloader = ResultOffloader(provider, config.tool_result_policy)
            for tool in expansion_tools(offloader):
                registry.register(tool, replace=True)
        if toolbox is None and config.toolbox_agent_id is not None:
            toolbox = Toolbox.load(provider, config.toolbox_agent_id, list(registry))
        if toolbox is not None and config.context_policy.semantic_routing:
            if toolbox_embedder is not None:
                toolbox.attach_embedder(toolbox_embedder)
            elif toolbox.embedder is None:
                from supervisor.toolbox.semantic import default_embedder

                # Tool vectors kept beside the ledger: a reload embeds only new tools.
                toolbox.attach_embedder(default_embedder(cache_dir=tool_vector_dir(provider.url)))
        cache = None
        if config.semantic_cache:
            cache = SemanticCache(
                provider.ledger, embedder=embedder, similarity=config.cache_similarity
            )
        context = RuntimeContext(
            config=config, ledger=provider.ledger, tools=registry, model=ChatModel(llm),
            toolbox=toolbox, offloader=offloader, cache=cache,
        )  # fmt: skip
        return cls(context, provider)

    @property
    def agent_id(self) -> str:
        """Stable id of this agent in the ledger."""
        return self.context.agent_id

    @property
    def name(self) -> str:
        """Human-readable name."""
        return self.context.config.name

    @property
    def config(self) -> AgentConfig:
        """The saved configuration."""
        return self.context.config

    @property
    def tools(self) -> ToolRegistry:
        """The live tool registry."""
        return self.context.tools

    @property
    def model(self) -> ChatModel:
        """The model endpoint."""
        return self.context.model

    @property
    def ledger(self) -> ApprovalLedger:
        """The approval ledger this agent writes to."""
        return self.context.ledger

    def __repr__(self) -> str:
        return f"<MemAgent {self.agent_id} tools={self.tools.names()}>"

    # -- running ---------------------------------------------------------------------------

    def run(
        self, query: str, thread_id: str | None = None, user_id: str | None = None
    ) -> RunResult:
        """Run the agent on ``query`` until it answers, pauses for approval, fails or hits a limit.

        Args:
            query: The user's message.
            thread_id: Continue this conversation thread (a new one if omitted).
            user_id: On whose behalf the agent acts (recorded on proposals).

        Returns:
            A :class:`RunResult`; ``status="awaiting_approval"`` carries the pending proposals.
        """
        history: list[dict[str, Any]] | RunResult
        if not thread_id:  # a new thread: no checkpoint to read
            thread_id = uuid.uuid4().hex
            history = new_thread_history(self.context)
        else:
            history = thread_history(self.context, thread_id)
        if isinstance(history, RunResult):
            return history
        result = start_run(self.context, query, thread_id, user_id, history)
        self.last_tool_outcomes = [outcome.as_dict() for outcome in result.outcomes]
        return result

    # -- approvals -------------------------------------------------------------------------

    def list_approval_proposals(
        self, status: str | ProposalStatus | None = "pending", thread_id: str | None = None
    ) -> list[Proposal]:
        """This agent's proposals (oldest first); each also reads like a dict."""
        return _resume.list_proposals(self.context, status, thread_id)

    def approve(
        self, proposal_id: str, approver_id: str, reason: str | None = None,
        *, context: ApproverContext | None = None,
    ) -> Proposal:  # fmt: skip
        """Approve a pending proposal (recorded with the approver's identity, via sdk)."""
        return self.ledger.approve(proposal_id, approver_id, reason, context=context, via="sdk")

    def reject(
        self, proposal_id: str, approver_id: str, reason: str | None = None,
        *, context: ApproverContext | None = None,
    ) -> Proposal:  # fmt: skip
        """Reject a pending proposal; the model is told it was denied, and nothing runs."""
        return self.ledger.reject(proposal_id, approver_id, reason, context=context, via="sdk")

    def cancel_approval(
        self, proposal_id: str, approver_id: str, reason: str | None = None,
        *, context: ApproverContext | None = None,
    ) -> Proposal:  # fmt: skip
        """Cancel a pending proposal; the model is told it was cancelled, and nothing runs."""
        return self.ledger.cancel(proposal_id, approver_id, reason, context=context, via="sdk")

    def wait_for_decision(self, proposal_id: str, timeout: float) -> Proposal:
        """Block until a human decides the proposal elsewhere, or ``timeout`` seconds pass.

        An edit does not end the wait: the returned proposal is the decided end of the edit
        chain (pass its id, or the original's, to :meth:`resume_approval`).
        """
        return _resume.wait_for_decision(self.context, proposal_id, timeout)

    def resume_approval(
        self, proposal_id: str, continue_model: bool = False
    ) -> ApprovalResumeResult:
        """Act on a decided proposal from its stored checkpoint, in any process.

        The proposal's edit chain is followed to its live end first, so ``proposal_id`` may be
        the call's original proposal: an approved edit runs with the edited arguments (never
        the original's) and the model is told ``edited_by_human`` with the diff.

        Approved: claim it (recomputing the args hash from the checkpointed call), run the tool
        once and record the outcome. Rejected, cancelled or expired: nothing runs; the model will
        be told so. A second resume never runs anything again.

        Args:
            proposal_id: The proposal.
            continue_model: Go on with the model once every call of the paused turn is decided.

        Returns:
            An :class:`ApprovalResumeResult`.
        """
        result = _resume.resume(self.context, proposal_id, continue_model)
        if result.run is not None:
            self.last_tool_outcomes = [outcome.as_dict() for outcome in result.run.outcomes]
        elif result.outcome is not None:
            self.last_tool_outcomes = [result.outcome.as_dict()]
        return result

    # -- persistence -----------------------------------------------------------------------

    def save(self) -> MemAgent:
        """Save the configuration and tool registry in the ledger (for :meth:`load`)."""
        self.ledger.save_agent(self.agent_id, self.name, self.config.model_dump(mode="json"))
        return self

    @classmethod
    def load(
        cls,
        agent_id: str,
        *,
        memory_provider: SQLModelProvider | None = None,
        tools: Iterable[Any] = (),
        allowlist: Iterable[str] = (),
        api_key: str | None = None,
        toolbox_embedder: Any = None,
    ) -> MemAgent:
        """Re-create a saved agent in this process.

        Tools are rebound from ``tools`` (the live registry) or, failing that, from their saved
        import references when those are on ``allowlist``; never from stored code. A saved
        ``ContextPolicy(semantic_routing=True)`` ranks the rebuilt toolbox hybrid again, with
        ``toolbox_embedder`` or else the bundled model (e.g.
        ``default_embedder(cache_dir=...)`` keeps tool vectors between processes).

        Raises:
            AgentNotFound: no agent with that id was saved in this ledger.
            ReferenceNotAllowed, ReferenceMismatch: a tool cannot be rebound safely.
            SemanticExtraMissing: the agent routes semantically and the extra is missing.
        """
        provider = memory_provider or SQLModelProvider()
        record = provider.ledger.load_agent(agent_id)
        if record is None:
            raise AgentNotFound(
                f"No agent {agent_id!r} is saved in {provider.url}.",
                hint="Save it with build_and_save(), or point at the right ledger.",
            )
        config = AgentConfig.model_validate(record.config)
        registry = ToolRegistry(tools, allowlist=allowlist)
        for reference in config.tools:
            registry.rebind(reference.name, reference.import_ref, reference.schema_hash)
        return cls.from_config(
            config, provider, registry, api_key=api_key, toolbox_embedder=toolbox_embedder
        )


__all__ = ["MemAgent"]
