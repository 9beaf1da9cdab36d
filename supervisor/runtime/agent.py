"""``MemAgent``: an agent over any OpenAI-compatible endpoint with governed, durable tools."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from supervisor.canonical import canonical_hash
from supervisor.ledger.models import ApproverContext, Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.policies import ContextPolicy
from supervisor.runtime import resume as _resume
from supervisor.runtime.config import AgentConfig, LLMConfig
from supervisor.runtime.delivery import Delivery, deliver_result
from supervisor.runtime.engine import Refusal, TurnEngine, unknown_tool
from supervisor.runtime.errors import AgentNotFound, CheckpointTooNew
from supervisor.runtime.llm import ChatModel, ModelToolCall
from supervisor.runtime.pointers import pointer_scope
from supervisor.runtime.results import ApprovalResumeResult, RunResult, RunStatus
from supervisor.runtime.state import RUN_STATE_VERSION, RunState
from supervisor.runtime.trace import RunTracer
from supervisor.store.provider import SQLModelProvider
from supervisor.tools.dispatch import ToolCallResult
from supervisor.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from supervisor.runtime.cache import SemanticCache
    from supervisor.runtime.offload import ResultOffloader
    from supervisor.tools.governed import GovernedTool

    AnyTool = GovernedTool[..., Any]


class MemAgent:
    """An agent whose tool calls are governed and whose approvals are durable.

    Build one with :class:`~supervisor.runtime.builder.MemAgentBuilder`, or re-create a saved
    one in any process with :meth:`load`.
    """

    def __init__(
        self,
        config: AgentConfig,
        provider: SQLModelProvider,
        registry: ToolRegistry,
        *,
        api_key: str | None = None,
        toolbox: Any = None,
        offloader: ResultOffloader | None = None,
        cache: SemanticCache | None = None,
        base_url: str | None = None,
    ) -> None:
        self.config = config
        self.provider = provider
        self.tools = registry
        live = {"api_key": api_key, "base_url": base_url}  # credentials: memory only, never saved
        llm = LLMConfig.from_mapping(
            {**config.llm, **{key: value for key, value in live.items() if value is not None}}
        )
        self.model = ChatModel(llm)
        provider.trace_secrets.add(*llm.secret_values())
        self.toolbox = toolbox
        self.offloader = offloader
        self.cache = cache
        self.last_tool_outcomes: list[dict[str, Any]] = []
        self.engine = TurnEngine(self)

    @property
    def agent_id(self) -> str:
        """Stable id of this agent in the ledger."""
        return self.config.agent_id

    @property
    def name(self) -> str:
        """Human-readable name."""
        return self.config.name

    @property
    def ledger(self) -> ApprovalLedger:
        """The approval ledger this agent writes to."""
        return self.provider.ledger

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
        thread_id = thread_id or uuid.uuid4().hex
        state = RunState(run_id=uuid.uuid4().hex, user_id=user_id)
        tracer = RunTracer(self.ledger, self.agent_id, thread_id, state.run_id)
        messages = self._history(thread_id)
        if isinstance(messages, RunResult):
            return messages
        fresh_thread = not any(message.get("role") != "system" for message in messages)
        messages.append({"role": "user", "content": query})
        tracer.event("run", outcome_status="started", user_id=user_id, query_chars=len(query))
        context = self.cache_context(user_id) if self.cache is not None else ""
        if self.cache is not None and fresh_thread:
            cached = self.cache.lookup(self.agent_id, context, query)
            if cached is not None:
                return self._finish(self._cached_run(messages, state, tracer, cached))
        with self.pointer_scope(thread_id, user_id):
            result = self.engine.run_loop(messages, state, tracer)
        if (
            self.cache is not None
            and fresh_thread
            and result.status == "completed"
            and result.output is not None
            and self.cache.admissible(result.outcomes, self.tools)
        ):
            self.cache.store(self.agent_id, context, query, result.output)
        return self._finish(result)

    def tools_hash(self) -> str:
        """Hash of every tool contract this agent has (part of the cache's key)."""
        return canonical_hash(sorted(tool.schema_hash for tool in self.tools))

    def cache_context(self, user_id: str | None) -> str:
        """Hash of everything besides the query that shapes this agent's answer for a user.

        Tool contracts, the user, the tools in that user's scope (toolbox handles and in-scope
        registry tools), the instructions, the model configuration and the context policy.
        """
        from supervisor.runtime.cache import answer_context

        policy = self.config.context_policy
        scope = [tool.name for tool in self.tools if self._in_scope(tool)]
        if self.toolbox is not None:
            scope.extend(self.toolbox.scope(policy, user_id))
        config = {
            "instructions": self.config.instructions,
            "llm": self.config.llm,
            "context_policy": policy.model_dump(mode="json"),
        }
        return answer_context(
            tools_hash=self.tools_hash(), user_id=user_id, scope=scope, config=config
        )

    def _cached_run(
        self, messages: list[dict[str, Any]], state: RunState, tracer: RunTracer, answer: str
    ) -> RunResult:
        messages.append({"role": "assistant", "content": answer})
        state.status = "completed"
        self.save_checkpoint(tracer.thread_id, messages, [], state)
        tracer.event("cache_hit", outcome_status="completed")
        tracer.flush()
        return self.run_result("completed", tracer, state, output=answer)

    def _history(self, thread_id: str) -> list[dict[str, Any]] | RunResult:
        checkpoint = self.ledger.latest_checkpoint(self.agent_id, thread_id)
        if checkpoint is None:
            return (
                [{"role": "system", "content": self.config.instructions}]
                if (self.config.instructions)
                else []
            )
        state = self.load_state(checkpoint.state)
        if state.status == "awaiting_approval":
            return RunResult(
                status="failed", agent_id=self.agent_id, thread_id=thread_id, run_id=state.run_id,
                error={
                    "code": "thread_awaiting_approval",
                    "message": "This thread waits for approval decisions; decide and resume "
                    "them (resume_approval) before sending a new message.",
                },
            )  # fmt: skip
        return [dict(message) for message in checkpoint.messages]

    def _finish(self, result: RunResult) -> RunResult:
        self.last_tool_outcomes = list(result.outcomes)
        return result

    def run_result(
        self,
        status: RunStatus,
        tracer: RunTracer,
        state: RunState,
        *,
        output: str | None = None,
        proposals: list[Proposal] | None = None,
        error: dict[str, Any] | None = None,
    ) -> RunResult:
        """Assemble the :class:`RunResult` of the current run."""
        return RunResult(
            status=status, agent_id=self.agent_id, thread_id=tracer.thread_id,
            run_id=state.run_id, output=output, proposals=proposals or [],
            outcomes=list(state.outcomes), usage=dict(state.usage), error=error,
        )  # fmt: skip

    # -- tools -----------------------------------------------------------------------------

    def _in_scope(self, tool: AnyTool) -> bool:
        return self.config.context_policy.permits(tool.name, tool.policy.domains)

    def tool_payload(
        self, messages: list[dict[str, Any]], state: RunState, tracer: RunTracer
    ) -> list[dict[str, Any]]:
        """The tool definitions sent with the next model request."""
        if self.toolbox is not None:
            query = _last_user_text(messages)
            selection = self.toolbox.select(
                query, self.config.context_policy, user_id=state.user_id
            )
            state.toolbox_state = {"revealed": [tool.name for tool in selection.tools]}
            tracer.event("tools_revealed", **selection.trace())
            definitions: list[dict[str, Any]] = list(self.toolbox.meta_tool_definitions())
            definitions.extend(selection.openai_definitions())
            definitions.extend(tool.openai.definition for tool in self._expansion_tools())
            return definitions
        return [tool.openai.definition for tool in self.tools if self._in_scope(tool)]

    def _expansion_tools(self) -> list[AnyTool]:
        if self.offloader is None:
            return []
        from supervisor.runtime.offload import NEVER_OFFLOAD

        return [tool for tool in self.tools if tool.name in NEVER_OFFLOAD]

    def resolve_call(
        self, call: ModelToolCall, state: RunState, tracer: RunTracer
    ) -> Refusal | str | tuple[AnyTool, str]:
        """The tool and arguments a model call names, a meta-tool's answer text, or a refusal.

        A tool outside the caller's scope is refused exactly like a tool that does not exist,
        so the model cannot probe which tools other users or agents have.
        """
        if self.toolbox is not None:
            resolved: Refusal | str | tuple[AnyTool, str] | None = self.toolbox_call(call, state)
            if resolved is not None:
                return resolved
        if call.name not in self.tools:
            return unknown_tool(call.name)
        tool = self.tools.get(call.name)
        if not self._in_scope(tool):
            return unknown_tool(call.name, "tool_out_of_scope")
        return tool, call.arguments

    def toolbox_call(
        self, call: ModelToolCall, state: RunState
    ) -> Refusal | str | tuple[AnyTool, str] | None:
        """Handle the toolbox's meta-tools; ``None`` for any other call."""
        from supervisor.runtime.toolbox_calls import handle_meta_call

        return handle_meta_call(self, call, state)

    def deliver(self, tool_name: str, call_id: str, result: ToolCallResult) -> Delivery:
        """What the model receives for a result: inline, a pointer to a stored blob, or a
        ``result_too_large`` refusal (see :mod:`supervisor.runtime.delivery`)."""
        return deliver_result(
            tool_name, call_id, result, offloader=self.offloader,
            max_chars=self.config.context_policy.max_result_chars,
        )  # fmt: skip

    def pointer_scope(self, thread_id: str, user_id: str | None) -> AbstractContextManager[Any]:
        """Offloaded results issued and read in the block belong to this thread and user."""
        return pointer_scope(self.agent_id, thread_id, user_id)

    # -- checkpoints -----------------------------------------------------------------------

    def save_checkpoint(
        self,
        thread_id: str,
        messages: list[dict[str, Any]],
        pending: Iterable[dict[str, Any]],
        state: RunState,
        *,
        checkpoint_id: str | None = None,
    ) -> str:
        """Store the run's state as JSON; returns the checkpoint id."""
        checkpoint = self.ledger.save_checkpoint(
            self.agent_id, thread_id, messages, list(pending),
            state=state.model_dump(mode="json"), checkpoint_id=checkpoint_id,
        )  # fmt: skip
        return checkpoint.checkpoint_id

    @staticmethod
    def load_state(raw: dict[str, Any]) -> RunState:
        """Parse a checkpoint's run state, refusing one from a newer runtime."""
        version = int(raw.get("version", RUN_STATE_VERSION))
        if version > RUN_STATE_VERSION:
            raise CheckpointTooNew(
                f"The checkpoint was written by a newer runtime (state version {version}, "
                f"this one reads {RUN_STATE_VERSION}).",
                hint="Upgrade agent-supervisor in this process before resuming.",
            )
        return RunState.model_validate(raw)

    # -- approvals -------------------------------------------------------------------------

    def list_approval_proposals(
        self, status: str | ProposalStatus | None = "pending", thread_id: str | None = None
    ) -> list[Proposal]:
        """This agent's proposals (oldest first); each also reads like a dict."""
        return _resume.list_proposals(self, status, thread_id)

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
        """Block until a human decides the proposal elsewhere, or ``timeout`` seconds pass."""
        return _resume.wait_for_decision(self, proposal_id, timeout)

    def resume_approval(
        self, proposal_id: str, continue_model: bool = False
    ) -> ApprovalResumeResult:
        """Act on a decided proposal from its stored checkpoint, in any process.

        Approved: claim it (recomputing the args hash from the checkpointed call), run the tool
        once and record the outcome. Rejected, cancelled or expired: nothing runs; the model will
        be told so. A second resume never runs anything again.

        Args:
            proposal_id: The proposal.
            continue_model: Go on with the model once every call of the paused turn is decided.

        Returns:
            An :class:`ApprovalResumeResult`.
        """
        result = _resume.resume(self, proposal_id, continue_model)
        if result.run is not None:
            self.last_tool_outcomes = list(result.run.outcomes)
        elif result.outcome is not None:
            self.last_tool_outcomes = [result.outcome]
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
    ) -> MemAgent:
        """Re-create a saved agent in this process.

        Tools are rebound from ``tools`` (the live registry) or, failing that, from their saved
        import references when those are on ``allowlist``; never from stored code.

        Raises:
            AgentNotFound: no agent with that id was saved in this ledger.
            ReferenceNotAllowed, ReferenceMismatch: a tool cannot be rebound safely.
        """
        from supervisor.runtime.builder import assemble

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
        return assemble(config, provider, registry, api_key=api_key)


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


__all__ = ["ContextPolicy", "MemAgent"]
