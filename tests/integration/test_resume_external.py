"""An orphan of an agent this SDK did not build (Claude Code, an MCP gateway, an ACP session)
cannot be resumed by a supervisor: the refusal says what to do instead, per runtime."""

from __future__ import annotations

import pytest

from supervisor.runtime.restart import NotResumable, check_rebuildable
from supervisor.store.provider import SQLModelProvider


@pytest.mark.parametrize(
    ("runtime", "owner", "advice"),
    [
        ("claude-code", "claude-code", "Claude Code asks again"),
        ("mcp:notes", "mcp-gateway:notes", "through `supervisor mcp-gateway`"),
        ("acp:my-agent", "acp:my-agent", "The ACP session ended with its relay"),
    ],
)
def test_an_external_runtimes_orphan_says_what_to_do(
    provider: SQLModelProvider, runtime: str, owner: str, advice: str
) -> None:
    proposal = provider.ledger.propose(
        "write", "a" * 64, {"x": 1}, owner=owner, runtime=runtime, thread_id="s1"
    )
    with pytest.raises(NotResumable) as caught:
        check_rebuildable(provider.ledger, proposal, frozenset())
    assert runtime in str(caught.value)
    assert advice in (caught.value.hint or "")


def test_our_own_unsaved_agent_still_gets_the_sdk_advice(provider: SQLModelProvider) -> None:
    proposal = provider.ledger.propose("write", "a" * 64, {"x": 1}, owner="my-agent")
    with pytest.raises(NotResumable) as caught:
        check_rebuildable(provider.ledger, proposal, frozenset())
    assert "supervisor run MODULE:FACTORY" in (caught.value.hint or "")
