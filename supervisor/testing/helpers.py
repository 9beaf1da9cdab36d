"""Helpers for users' tests: a throwaway ledger, a model config, refusal and approval shortcuts.

They use only the public SDK (``from supervisor import ...``), as a user's own tests would, and
real parts: a real SQLite ledger file and a real `ScriptedModel` server on loopback.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from supervisor import MemAgent, SQLModelProvider, ToolCallResult
    from supervisor.testing.scripted_model import ScriptedModel
    from supervisor.tools.contract import Tool

__all__ = ["approve_all", "assert_refused", "llm_config", "temporary_ledger"]


@contextmanager
def temporary_ledger() -> Iterator[SQLModelProvider]:
    """A fresh SQLite ledger in a temporary folder, closed and deleted afterwards."""
    from supervisor import SQLModelProvider

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


def assert_refused(tool: Tool, arguments: str | Mapping[str, Any], code: str) -> ToolCallResult:
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
