"""Semantic routing end to end: ``ContextPolicy(semantic_routing=True)`` through ``MemAgent``.

The query shares no word with the tool that answers it, so the lexical router reveals nothing
and only the bundled embedding model (``agent-supervisor[semantic]``) can put the tool in the
request the model receives; the flag is saved with the agent, so ``MemAgent.load`` (which
rebuilds the toolbox from the ledger) ranks the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from supervisor import (
    ContextPolicy,
    MemAgent,
    MemAgentBuilder,
    SQLModelProvider,
    Toolbox,
    governed_tool,
)
from supervisor.testing import Reply, ScriptedModel
from supervisor.toolbox import semantic as semantic_module
from supervisor.toolbox.semantic import MiniLMEmbedder, SemanticExtraMissing, default_embedder

QUERY = "Will it rain in Lisbon tomorrow?"
WANTED = "weather_forecast"


@governed_tool
def weather_forecast(city: str) -> dict[str, Any]:
    """Tell the weather forecast for a city over the next days."""
    return {"city": city, "forecast": "sunny"}


@governed_tool
def convert_currency(amount: float, target: str) -> dict[str, Any]:
    """Convert an amount of money into another currency."""
    return {"amount": amount, "target": target}


@governed_tool
def translate_text(text: str, language: str) -> dict[str, Any]:
    """Translate a text into another language."""
    return {"text": text, "language": language}


@governed_tool
def book_table(restaurant: str, guests: int) -> dict[str, Any]:
    """Book a table at a restaurant."""
    return {"restaurant": restaurant, "guests": guests}


TOOLS: list[Any] = [weather_forecast, convert_currency, translate_text, book_table]


def _llm(model: ScriptedModel) -> dict[str, Any]:
    return {"provider": "openai", "model": "m", "base_url": model.base_url, "api_key": "k"}


def _revealed(model: ScriptedModel, request: int) -> list[str]:
    return model.requests[request].tool_names[2:]  # after discover_tools and invoke_tool


def _toolbox(provider: SQLModelProvider, agent_id: str, **options: Any) -> Toolbox:
    return Toolbox.from_functions(TOOLS, memory_provider=provider, agent_id=agent_id, **options)


def test_the_lexical_router_reveals_nothing_for_this_query(provider: SQLModelProvider) -> None:
    """The control: without semantic routing the wanted tool is never shown."""
    with ScriptedModel([Reply("ok")]) as model:
        agent = (
            MemAgentBuilder()
            .with_agent_id("lexical")
            .with_llm_config(_llm(model))
            .with_memory_provider(provider)
            .with_toolbox(_toolbox(provider, "lexical"))
            .with_context_policy(ContextPolicy(tool_top_k=1))
            .build_and_save()
        )
        agent.run(QUERY)
        assert _revealed(model, 0) == []
    assert agent.context.toolbox is not None
    assert agent.context.toolbox.backend == "lexical"


def test_policy_flag_routes_semantically_and_survives_load(provider: SQLModelProvider) -> None:
    with ScriptedModel([Reply("first"), Reply("second")]) as model:
        agent = (
            MemAgentBuilder()
            .with_agent_id("semantic")
            .with_llm_config(_llm(model))
            .with_memory_provider(provider)
            .with_toolbox(_toolbox(provider, "semantic"))
            .with_context_policy(ContextPolicy(tool_top_k=1, semantic_routing=True))
            .build_and_save()
        )
        assert agent.run(QUERY).status == "completed"
        loaded = MemAgent.load("semantic", memory_provider=provider, tools=TOOLS, api_key="k")
        assert loaded.run(QUERY).status == "completed"
        assert _revealed(model, 0) == [WANTED]
        assert _revealed(model, 1) == [WANTED]
    assert loaded.config.context_policy.semantic_routing
    assert loaded.context.toolbox is not None
    assert loaded.context.toolbox.backend == "lexical+embedding"
    assert isinstance(loaded.context.toolbox.embedder, MiniLMEmbedder)


def test_tool_vectors_are_kept_beside_the_ledger_so_a_reload_embeds_nothing(
    provider: SQLModelProvider, tmp_path: Path
) -> None:
    """The default model keeps each tool's vector in ``embeddings/`` next to the ledger file:
    loading the agent again (a restart) finds every tool there and does not even load the
    model until a query needs it."""
    with ScriptedModel([Reply("first"), Reply("second")]) as model:
        (
            MemAgentBuilder()
            .with_agent_id("kept")
            .with_llm_config(_llm(model))
            .with_memory_provider(provider)
            .with_toolbox(_toolbox(provider, "kept"))
            .with_context_policy(ContextPolicy(tool_top_k=1, semantic_routing=True))
            .build_and_save()
        )
        folder = tmp_path / "embeddings"
        [model_folder] = list(folder.iterdir())
        keys = json.loads((model_folder / "keys.json").read_text())
        assert len(keys) == len(TOOLS)
        written = (model_folder / "vectors.npy").stat().st_mtime_ns
        loaded = MemAgent.load("kept", memory_provider=provider, tools=TOOLS, api_key="k")
        embedder = loaded.context.toolbox.embedder if loaded.context.toolbox else None
        assert isinstance(embedder, MiniLMEmbedder)
        assert embedder._encoder is None  # every tool vector came from the folder
        assert (model_folder / "vectors.npy").stat().st_mtime_ns == written
        assert loaded.run(QUERY).status == "completed"
        assert _revealed(model, 0) == [WANTED]


def test_an_unwritable_vector_folder_costs_the_cache_not_the_agent(
    provider: SQLModelProvider, tmp_path: Path
) -> None:
    (tmp_path / "embeddings").write_text("a file where the folder would go")
    with ScriptedModel([Reply("ok")]) as model:
        agent = (
            MemAgentBuilder()
            .with_agent_id("no-cache")
            .with_llm_config(_llm(model))
            .with_memory_provider(provider)
            .with_toolbox(_toolbox(provider, "no-cache"))
            .with_context_policy(ContextPolicy(tool_top_k=1, semantic_routing=True))
            .build_and_save()
        )
        assert agent.run(QUERY).status == "completed"
        assert _revealed(model, 0) == [WANTED]


def test_a_toolbox_built_with_the_model_is_saved_as_semantic(provider: SQLModelProvider) -> None:
    """No flag set by hand: the toolbox's embedder puts it in the saved policy."""
    toolbox = _toolbox(provider, "hybrid-box", embedder=default_embedder())
    with ScriptedModel([Reply("ok")]) as model:
        (
            MemAgentBuilder()
            .with_agent_id("hybrid-box")
            .with_llm_config(_llm(model))
            .with_memory_provider(provider)
            .with_toolbox(toolbox)
            .with_context_policy(ContextPolicy(tool_top_k=1))
            .build_and_save()
        )
        loaded = MemAgent.load("hybrid-box", memory_provider=provider, tools=TOOLS, api_key="k")
        loaded.run(QUERY)
        assert _revealed(model, 0) == [WANTED]
    assert loaded.config.context_policy.semantic_routing


def test_a_given_embedder_is_used_on_load(provider: SQLModelProvider) -> None:
    toolbox = _toolbox(provider, "own-model")
    with ScriptedModel([Reply("ok")]) as model:
        (
            MemAgentBuilder()
            .with_agent_id("own-model")
            .with_llm_config(_llm(model))
            .with_memory_provider(provider)
            .with_toolbox(toolbox)
            .with_context_policy(ContextPolicy(tool_top_k=1, semantic_routing=True))
            .build_and_save()
        )
        mine = default_embedder()
        loaded = MemAgent.load(
            "own-model", memory_provider=provider, tools=TOOLS, api_key="k", toolbox_embedder=mine
        )
    assert loaded.context.toolbox is not None
    assert loaded.context.toolbox.embedder is mine


def test_without_the_extra_building_says_what_to_install(
    provider: SQLModelProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == semantic_module.MODEL_PACKAGE else real_find_spec(name)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    builder = (
        MemAgentBuilder()
        .with_agent_id("no-extra")
        .with_llm_config({"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9"})
        .with_memory_provider(provider)
        .with_toolbox(_toolbox(provider, "no-extra"))
        .with_context_policy(ContextPolicy(semantic_routing=True))
    )
    with pytest.raises(SemanticExtraMissing) as caught:
        builder.build()
    assert caught.value.code == "semantic_extra_missing"
    assert semantic_module.INSTALL_HINT in (caught.value.hint or "")
