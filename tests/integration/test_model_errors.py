"""A failed model request says which endpoint was tried, what went wrong and what to do: a
refused key is a bad key (and is not retried), an unknown model is named, a dead endpoint names
its URL and cause, and `supervisor run` prints all of it as lines, not a dict."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from support.agents import inventory_lookup
from support.cli import run_cli

from supervisor import MemAgentBuilder, SQLModelProvider
from supervisor.testing import Fail, Reply, ScriptedModel, llm_config


def _agent(provider: SQLModelProvider, config: dict[str, Any]) -> Any:
    return (
        MemAgentBuilder()
        .with_llm_config(config)
        .with_memory_provider(provider)
        .with_tools([inventory_lookup])
        .build()
    )


def _failed_run(provider: SQLModelProvider, config: dict[str, Any]) -> dict[str, Any]:
    result = _agent(provider, config).run("hello", thread_id="t-1")
    assert result.status == "failed" and result.error is not None
    return dict(result.error)


def test_a_refused_key_is_called_a_bad_key_and_not_retried(provider: SQLModelProvider) -> None:
    with ScriptedModel([Fail(401, "Incorrect API key.", times=5), Reply("never")]) as model:
        error = _failed_run(provider, llm_config(model, max_retries=3))
        assert len(model.requests) == 1, "a 401 is final: the same key fails the same way"
    assert error["code"] == "model_auth_failed"
    assert (
        f"The model endpoint {model.base_url} refused the API key (HTTP 401)" in (error["message"])
    )
    assert "retries" not in error["message"].replace("not retried", "")
    assert "OPENAI_API_KEY" in error["hint"]
    events = provider.ledger.trace_events(kind="model_call")
    assert [e.reason_code for e in events] == ["model_auth_failed"]


def test_an_unknown_model_is_named(provider: SQLModelProvider) -> None:
    with ScriptedModel([Fail(404, "The model `gpt-9` does not exist.")]) as model:
        error = _failed_run(provider, {**llm_config(model, max_retries=0), "model": "gpt-9"})
    assert error["code"] == "model_not_served"
    assert "model 'gpt-9'" in error["message"] and model.base_url in error["message"]
    assert "does not exist" in error["message"], "the endpoint's own words are kept"


def test_a_failing_endpoint_reports_its_retries_and_escapes_its_words(
    provider: SQLModelProvider,
) -> None:
    hostile = "overloaded \u202ereversed\u202c \x1b[31mred"
    with ScriptedModel([Fail(503, hostile, times=3, retry_after=0)]) as model:
        error = _failed_run(provider, llm_config(model, max_retries=1))
        assert len(model.requests) == 2
    assert error["code"] == "model_unavailable"
    assert f"{model.base_url} answered HTTP 503 after 1 retries" in error["message"]
    assert "\\u202e" in error["message"] and "\\u001b" in error["message"]
    assert not any(char in error["message"] for char in "\u202e\u202c\x1b")


def test_an_unreachable_endpoint_names_the_url_and_the_cause(provider: SQLModelProvider) -> None:
    config = {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1",
              "api_key": "sk-x", "max_retries": 0}  # fmt: skip
    error = _failed_run(provider, config)
    assert error["code"] == "model_unavailable"
    assert "Could not reach the model endpoint http://127.0.0.1:9/v1" in error["message"]
    assert "refused" in error["message"].lower()
    assert error["details"]["url"] == "http://127.0.0.1:9/v1"


def test_credentials_in_the_url_never_reach_the_message(provider: SQLModelProvider) -> None:
    config = {"provider": "openai", "model": "m", "api_key": "sk-x", "max_retries": 0,
              "base_url": "http://ops:hunter2@127.0.0.1:9/v1?api-key=s3cret"}  # fmt: skip
    error = _failed_run(provider, config)
    shown = repr(error)
    assert "http://127.0.0.1:9/v1" in shown
    assert "hunter2" not in shown and "s3cret" not in shown


def test_supervisor_run_prints_the_error_as_lines(tmp_path: Path) -> None:
    tests = str(Path(__file__).parents[1])
    env = {
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-x",
        "SUPERVISOR_HOME": str(tmp_path / "home"), "SIDE_EFFECT_FILE": str(tmp_path / "fx"),
        "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]),
    }  # fmt: skip
    done = run_cli("run", "support.run_factories:crm_agent", "--input", "hi", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[run] failed [model_unavailable]: Could not reach the model endpoint " in done.stdout
    assert "http://127.0.0.1:9/v1" in done.stdout
    assert "  Check OPENAI_BASE_URL" in done.stdout
    assert "{'code'" not in done.stdout
