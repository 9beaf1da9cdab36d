"""Test helpers for users of the SDK: a scripted model server, a throwaway ledger, assertions.

    from supervisor.testing import ScriptedModel, CallTools, ToolCall, Reply, temporary_ledger

    with temporary_ledger() as provider, ScriptedModel([
        CallTools([ToolCall("inventory_lookup", {"sku": "A-1"})]),
        Reply("12 left."),
    ]) as model:
        agent = (MemAgentBuilder().with_llm_config(model.llm_config())...)

Everything here uses real parts: a real HTTP server on 127.0.0.1 speaking the chat-completions
protocol and a real SQLite ledger file.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.scripted_model import (
    CallTools,
    Delay,
    Fail,
    RecordedRequest,
    Reply,
    ScriptedModel,
    ToolCall,
    Turn,
)

if TYPE_CHECKING:
    from supervisor.runtime.agent import MemAgent
    from supervisor.store.provider import SQLModelProvider
    from supervisor.tools.dispatch import ToolCallResult
    from supervisor.tools.governed import GovernedTool

__all__ = [
    "CallTools",
    "Delay",
    "Fail",
    "RecordedRequest",
    "Reply",
    "ScriptedModel",
    "ToolCall",
    "Turn",
    "approve_all",
    "assert_refused",
    "llm_config",
    "temporary_ledger",
]


@contextmanager
def temporary_ledger() -> Iterator[SQLModelProvider]:
    """A fresh SQLite ledger in a temporary folder, closed and deleted afterwards."""
    from supervisor.store.provider import SQLModelProvider

    with tempfile.TemporaryDirectory(prefix="supervisor-test-") as folder:
        provider = SQLModelProvider(f"sqlite:///{Path(folder) / 'ledger.db'}")
        try:
            yield provider
        finally:
            provider.close()


def llm_config(model: ScriptedModel, **extra: Any) -> dict[str, Any]:
    """A ``with_llm_config`` mapping that points at a running scripted model."""
    return {
        "provider": "openai",
        "model": model.model_name,
        "base_url": model.base_url,
        "api_key": model.api_key or "sk-scripted",
        **extra,
    }


def assert_refused(
    tool: GovernedTool[..., Any], arguments: str | Mapping[str, Any], code: str
) -> ToolCallResult:
    """Dispatch ``arguments`` and assert the call was refused with ``code`` without running.

    Returns:
        The result, for further assertions.

    Raises:
        AssertionError: the call was not refused, or with another code.
    """
    result = tool.dispatch(arguments)
    if result.error is None:
        raise AssertionError(f"{tool.name} accepted {arguments!r}; expected a {code!r} refusal")
    if result.error.code != code:
        raise AssertionError(
            f"{tool.name} refused {arguments!r} with {result.error.code!r}, expected {code!r}"
        )
    return result


def approve_all(agent: MemAgent, approver_id: str = "test@example.com") -> list[str]:
    """Approve every pending proposal of ``agent``; returns their ids (oldest first)."""
    approved = []
    for proposal in agent.list_approval_proposals(status="pending"):
        agent.approve(proposal.proposal_id, approver_id=approver_id, reason="approved by a test")
        approved.append(proposal.proposal_id)
    return approved
