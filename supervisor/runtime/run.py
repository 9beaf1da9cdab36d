"""Starting a run on a thread: its history, the semantic cache, then the turn loop."""

from __future__ import annotations

import uuid
from typing import Any

from supervisor.canonical import canonical_hash
from supervisor.runtime.cache import answer_context
from supervisor.runtime.calls import in_scope
from supervisor.runtime.context import RuntimeContext
from supervisor.runtime.engine import TurnEngine
from supervisor.runtime.pointers import pointer_scope
from supervisor.runtime.results import RunResult, run_result
from supervisor.runtime.state import RunState, load_state, save_checkpoint
from supervisor.runtime.trace import RunTracer


def start_run(
    context: RuntimeContext,
    query: str,
    thread_id: str,
    user_id: str | None,
    messages: list[dict[str, Any]],
) -> RunResult:
    """Run ``query`` on a thread whose history is ``messages`` (see :func:`thread_history`).

    See :meth:`MemAgent.run <supervisor.runtime.agent.MemAgent.run>`.
    """
    state = RunState(run_id=uuid.uuid4().hex, user_id=user_id)
    tracer = RunTracer(context.ledger, context.agent_id, thread_id, state.run_id)
    fresh_thread = not any(message.get("role") != "system" for message in messages)
    messages.append({"role": "user", "content": query})
    tracer.event("run", outcome_status="started", user_id=user_id, query_chars=len(query))
    cache = context.cache
    answer_key = cache_context(context, user_id) if cache is not None else ""
    if cache is not None and fresh_thread:
        cached = cache.lookup(context.agent_id, answer_key, query)
        if cached is not None:
            return _cached_run(context, messages, state, tracer, cached)
    with pointer_scope(context.agent_id, thread_id, user_id):
        result = TurnEngine(context).run_loop(messages, state, tracer)
    if (
        cache is not None
        and fresh_thread
        and result.status == "completed"
        and result.output is not None
        and cache.admissible(result.outcomes, context.tools)
    ):
        cache.store(context.agent_id, answer_key, query, result.output)
    return result


def tools_hash(context: RuntimeContext) -> str:
    """Hash of every tool contract the agent has (part of the cache's key)."""
    return canonical_hash(sorted(tool.schema_hash for tool in context.tools))


def cache_context(context: RuntimeContext, user_id: str | None) -> str:
    """Hash of everything besides the query that shapes the agent's answer for a user.

    Tool contracts, the user, the tools in that user's scope (toolbox handles and in-scope
    registry tools), the instructions, the model configuration and the context policy.
    """
    policy = context.policy
    scope = [tool.name for tool in context.tools if in_scope(context, tool)]
    if context.toolbox is not None:
        scope.extend(context.toolbox.scope(policy, user_id))
    config = {
        "instructions": context.config.instructions,
        "llm": context.config.llm,
        "context_policy": policy.model_dump(mode="json"),
    }
    return answer_context(
        tools_hash=tools_hash(context), user_id=user_id, scope=scope, config=config
    )


def _cached_run(
    context: RuntimeContext,
    messages: list[dict[str, Any]],
    state: RunState,
    tracer: RunTracer,
    answer: str,
) -> RunResult:
    messages.append({"role": "assistant", "content": answer})
    state.status = "completed"
    tracer.event("cache_hit", outcome_status="completed")
    save_checkpoint(
        context.ledger, context.agent_id, tracer.thread_id, messages, [], state,
        trace=tracer.take(),
    )  # fmt: skip
    return run_result("completed", tracer, state, output=answer)


def new_thread_history(context: RuntimeContext) -> list[dict[str, Any]]:
    """The messages a thread starts with: the instructions, if any."""
    instructions = context.config.instructions
    return [{"role": "system", "content": instructions}] if instructions else []


def thread_history(context: RuntimeContext, thread_id: str) -> list[dict[str, Any]] | RunResult:
    """The thread's messages so far, or a failed result while the thread waits for decisions."""
    checkpoint = context.ledger.latest_checkpoint(context.agent_id, thread_id)
    if checkpoint is None:
        return new_thread_history(context)
    state = load_state(checkpoint.state)
    if state.status == "awaiting_approval":
        return RunResult(
            status="failed", agent_id=context.agent_id, thread_id=thread_id, run_id=state.run_id,
            error={
                "code": "thread_awaiting_approval",
                "message": "This thread waits for approval decisions; decide and resume "
                "them (resume_approval) before sending a new message.",
            },
        )  # fmt: skip
    return [dict(message) for message in checkpoint.messages]
