"""Test doubles and helpers for users of the SDK, the same ones our own tests use.

    from supervisor import MemAgentBuilder, governed_tool
    from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall
    from supervisor.testing import llm_config, temporary_ledger

    @governed_tool(deterministic=True)
    def inventory_lookup(sku: str) -> dict:
        '''Units in stock for one SKU.'''
        return {"sku": sku, "available": 12}

    with temporary_ledger() as provider, ScriptedModel([
        CallTools([ToolCall("inventory_lookup", {"sku": "A-1"})]),
        Reply("12 left."),
    ]) as model:
        agent = (
            MemAgentBuilder()
            .with_llm_config(llm_config(model))
            .with_memory_provider(provider)
            .with_tools([inventory_lookup])
            .build()
        )
        assert agent.run("How many A-1?").output == "12 left."

Everything here uses real parts: `ScriptedModel` is a real HTTP server on 127.0.0.1 speaking
the chat-completions protocol (``python -m supervisor.testing.scripted_model`` serves a JSON
script from a subprocess) and `temporary_ledger` is a real SQLite ledger file.

Modules: ``scripted_model`` (the server and its command line), ``turns`` (what it answers, and
the JSON script format), ``protocol`` (the wire format), ``server`` (the HTTP layer),
``helpers`` (ledger, config and assertion shortcuts). Names load on first use, so running
``python -m supervisor.testing.scripted_model`` executes that module exactly once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "CallTools": "supervisor.testing.turns",
    "Delay": "supervisor.testing.turns",
    "Fail": "supervisor.testing.turns",
    "Reply": "supervisor.testing.turns",
    "ScriptError": "supervisor.testing.turns",
    "ToolCall": "supervisor.testing.turns",
    "Turn": "supervisor.testing.turns",
    "RecordedRequest": "supervisor.testing.protocol",
    "ScriptedModel": "supervisor.testing.scripted_model",
    "ScriptedModelNotRunning": "supervisor.testing.scripted_model",
    "approve_all": "supervisor.testing.helpers",
    "assert_refused": "supervisor.testing.helpers",
    "llm_config": "supervisor.testing.helpers",
    "temporary_ledger": "supervisor.testing.helpers",
}

__all__ = [
    "CallTools",
    "Delay",
    "Fail",
    "RecordedRequest",
    "Reply",
    "ScriptError",
    "ScriptedModel",
    "ScriptedModelNotRunning",
    "ToolCall",
    "Turn",
    "approve_all",
    "assert_refused",
    "llm_config",
    "temporary_ledger",
]

if TYPE_CHECKING:
    from supervisor.testing.helpers import approve_all, assert_refused, llm_config, temporary_ledger
    from supervisor.testing.protocol import RecordedRequest
    from supervisor.testing.scripted_model import ScriptedModel, ScriptedModelNotRunning
    from supervisor.testing.turns import (
        CallTools,
        Delay,
        Fail,
        Reply,
        ScriptError,
        ToolCall,
        Turn,
    )


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
