"""The helpers users import from supervisor.testing work as documented."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.agents import create_customer, inventory_lookup, side_effects

from supervisor import MemAgentBuilder
from supervisor.testing import (
    CallTools,
    Reply,
    ScriptedModel,
    ToolCall,
    Turn,
    approve_all,
    assert_refused,
    llm_config,
    temporary_ledger,
)


def test_assert_refused_passes_and_fails_as_documented() -> None:
    assert_refused(inventory_lookup, {"sku": "A", "approved": True}, "reserved_argument")
    with pytest.raises(AssertionError, match="accepted"):
        assert_refused(inventory_lookup, {"sku": "A"}, "invalid_arguments")
    with pytest.raises(AssertionError, match="expected 'unknown_argument'"):
        assert_refused(inventory_lookup, {"sku": 1}, "unknown_argument")


def test_scripted_model_temporary_ledger_and_approve_all(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SIDE_EFFECT_FILE", str(tmp_path / "side_effects.log"))
    script: list[Turn] = [
        CallTools([ToolCall("create_customer", {"name": "Ada", "email": "a@b.c"})]),
        Reply("created"),
    ]
    with temporary_ledger() as provider, ScriptedModel(script) as model:
        agent = (
            MemAgentBuilder()
            .with_llm_config(llm_config(model))
            .with_memory_provider(provider)
            .with_tools([create_customer])
            .build()
        )
        assert agent.run("create Ada").status == "awaiting_approval"
        (proposal_id,) = approve_all(agent)
        resumed = agent.resume_approval(proposal_id, continue_model=True)
        assert resumed.consumed and resumed.assistant_response == "created"
        assert side_effects() == ["create_customer Ada a@b.c"]


def test_the_module_docstring_example_runs_as_written(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    import supervisor.testing

    doc = supervisor.testing.__doc__ or ""
    lines = doc.splitlines()[1:]
    body = lines[: next(i for i, line in enumerate(lines) if line and not line.startswith(" "))]
    example = textwrap.dedent("\n".join(body))
    assert "temporary_ledger()" in example and "ScriptedModel(" in example
    done = subprocess.run(
        [sys.executable, "-"], input=example + '\nprint("EXAMPLE OK")\n', text=True,
        cwd=tmp_path, capture_output=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "EXAMPLE OK"
