"""Governed dispatch: refusals with stable codes, binding, outcomes, results."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from supervisor import ToolOutcome, ToolOutcomeStatus, ToolResult, governed_tool
from supervisor.tools import ToolCallError

calls: list[dict[str, Any]] = []


@governed_tool(deterministic=True, domains=("inventory",))
def inventory_lookup(
    sku: str,
    warehouse: Literal["london", "new-york"] = "london",
) -> dict[str, Any]:
    """Return current inventory for one SKU and warehouse."""
    calls.append({"sku": sku, "warehouse": warehouse})
    return {"sku": sku, "warehouse": warehouse, "available": 12}


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    calls.clear()


@pytest.mark.parametrize(
    ("arguments", "code", "argument"),
    [
        ('{"sku": "A1", "colour": "red"}', "unknown_argument", "colour"),
        ('{"sku": "A1", "warehouse": "paris"}', "invalid_arguments", "warehouse"),
        ('{"sku": 123}', "invalid_arguments", "sku"),
        ('{"sku": "A1", "approved": true}', "reserved_argument", "approved"),
        ('{"sku": "A1", "confirm": true}', "reserved_argument", "confirm"),
        ('{"sku": "A1", "_approval": 1}', "reserved_argument", "_approval"),
        ('{"sku": "A1"', "invalid_json", None),
        ("not json", "invalid_json", None),
        ("{}", "missing_argument", "sku"),
        ('["A1"]', "invalid_arguments", None),
        ('{"sku": true}', "invalid_arguments", "sku"),
        ('{"sku": null}', "invalid_arguments", "sku"),
    ],
)
def test_refusals_have_codes_and_never_call_the_function(
    arguments: str, code: str, argument: str | None
) -> None:
    result = inventory_lookup.dispatch(arguments)
    assert calls == []
    assert result.error is not None
    assert result.error.code == code
    assert result.outcome.status is ToolOutcomeStatus.ERROR
    assert result.outcome.reason_code == code
    error = result.value["error"]
    assert error["code"] == code
    assert error.get("argument") == argument
    assert "Traceback" not in json.dumps(result.value)


def test_reserved_name_beats_unknown_when_both_are_sent() -> None:
    result = inventory_lookup.dispatch('{"sku": "A1", "zzz": 1, "approved": true}')
    assert result.error is not None
    assert result.error.code == "reserved_argument"
    assert {problem.code for problem in result.error.problems} == {
        "reserved_argument",
        "unknown_argument",
    }


def test_enum_refusal_says_what_was_expected() -> None:
    result = inventory_lookup.dispatch({"sku": "A1", "warehouse": "paris"})
    assert "london" in result.value["error"]["expected"]
    assert "paris" in result.value["error"]["message"]


def test_valid_call_applies_defaults_and_binds() -> None:
    result = inventory_lookup.dispatch('{"sku": "A1"}')
    assert result.ok
    assert calls == [{"sku": "A1", "warehouse": "london"}]
    assert result.value == {"sku": "A1", "warehouse": "london", "available": 12}
    assert result.outcome.status is ToolOutcomeStatus.SUCCESS
    assert result.latency_ms is not None and result.latency_ms >= 0
    assert result.evidence()["latency_ms"] == result.latency_ms
    assert result.timed_outcome() == ToolOutcome(latency_ms=result.latency_ms)


def test_mapping_arguments_and_empty_text() -> None:
    @governed_tool
    def ping() -> str:
        """Ping."""
        return "pong"

    assert ping.dispatch("").value == "pong"
    assert ping.dispatch(None).value == "pong"
    assert inventory_lookup.dispatch({"sku": "A1", "warehouse": "new-york"}).ok


def test_null_means_default_only_for_strict_nullable_parameters() -> None:
    assert inventory_lookup.dispatch('{"sku": "A1", "warehouse": null}').ok
    assert calls[-1]["warehouse"] == "london"


def test_prepared_arguments_are_json_with_defaults() -> None:
    prepared = inventory_lookup.prepare('{"sku": "A1"}')
    assert prepared.arguments == {"sku": "A1", "warehouse": "london"}


def test_prepare_raises_typed_error() -> None:
    with pytest.raises(ToolCallError) as caught:
        inventory_lookup.prepare('{"sku": 5}')
    assert caught.value.code == "invalid_arguments"


class Customer(BaseModel):
    name: str
    age: int


@governed_tool
def register(customer: Customer, tags: list[str]) -> dict[str, Any]:
    """Register a customer."""
    return {"name": customer.name, "is_model": isinstance(customer, Customer), "tags": tags}


def test_nested_models_are_strict_and_closed() -> None:
    ok = register.dispatch({"customer": {"name": "Ada", "age": 36}, "tags": ["vip"]})
    assert ok.value == {"name": "Ada", "is_model": True, "tags": ["vip"]}
    lax = register.dispatch({"customer": {"name": "Ada", "age": "36"}, "tags": []})
    assert lax.error is not None and lax.error.code == "invalid_arguments"
    assert lax.value["error"]["argument"] == "customer.age"
    extra = register.dispatch({"customer": {"name": "Ada", "age": 1, "admin": True}, "tags": []})
    assert extra.error is not None and extra.error.code == "unknown_argument"
    assert extra.value["error"]["argument"] == "customer.admin"
    wrong_item = register.dispatch({"customer": {"name": "Ada", "age": 1}, "tags": [1]})
    assert wrong_item.value["error"]["argument"] == "tags[0]"


def test_nan_and_infinity_are_refused() -> None:
    @governed_tool
    def scale(factor: float) -> float:
        """Scale."""
        return factor

    assert scale.dispatch('{"factor": NaN}').error is not None
    assert scale.dispatch('{"factor": 1e999}').error is not None
    assert scale.dispatch('{"factor": 2}').value == 2.0


def test_exception_text_never_reaches_the_model() -> None:
    @governed_tool
    def leaky(sku: str) -> None:
        """Fails with a secret in its message."""
        raise RuntimeError("connect failed: password=hunter2-secret token sk-abcdef1234567890")

    result = leaky.dispatch({"sku": "A1"})
    assert result.error is not None
    assert result.error.code == "tool_exception"
    model_text = result.model_content()
    assert "hunter2" not in model_text
    assert "sk-abcdef" not in model_text
    assert "RuntimeError" in model_text
    assert result.error.detail is not None
    assert "connect failed" in result.error.detail
    assert "hunter2" not in result.error.detail
    assert "sk-abcdef1234567890" not in result.error.detail


def test_results_must_be_json_data() -> None:
    @dataclasses.dataclass
    class Row:
        sku: str

    class Item(BaseModel):
        when: datetime.date

    @governed_tool
    def good() -> dict[str, Any]:
        """Good."""
        return {"rows": [Row("A1")], "item": Item(when=datetime.date(2026, 1, 2)), "t": (1, 2)}

    @governed_tool
    def bad() -> dict[str, Any]:
        """Bad."""
        return {"rows": {1, 2}}

    assert good.dispatch({}).value == {
        "rows": [{"sku": "A1"}],
        "item": {"when": "2026-01-02"},
        "t": [1, 2],
    }
    refused = bad.dispatch({})
    assert refused.error is not None
    assert refused.error.code == "result_not_serializable"
    assert "$.rows" in refused.value["error"]["message"]


def test_tool_result_is_unwrapped_and_outcome_kept() -> None:
    @governed_tool
    def lookup(sku: str) -> ToolResult[list[dict[str, str]]]:
        """Lookup with a fallback."""
        rows = [{"sku": sku}]
        outcome = ToolOutcome(
            status=ToolOutcomeStatus.FALLBACK,
            reason_code="primary_timeout",
            primary_provider="primary",
            fallback_provider="replica",
            degraded=True,
            result_count=1,
        )
        return ToolResult(rows, outcome)

    result = lookup.dispatch({"sku": "A1"})
    assert result.value == [{"sku": "A1"}]
    assert "outcome" not in result.model_content()
    assert "fallback" not in result.model_content()
    assert result.outcome.status is ToolOutcomeStatus.FALLBACK
    assert result.outcome.degraded is True
    assert result.outcome.latency_ms is None  # the tool's outcome, as it reported it
    assert result.latency_ms is not None
    assert result.evidence() == {**result.outcome.evidence(), "latency_ms": result.latency_ms}


def test_legacy_results_are_classified_from_structure() -> None:
    @governed_tool
    def search(query: str) -> dict[str, Any]:
        """Search."""
        return {"results": [], "message": "error-free run"}

    assert search.dispatch({"query": "x"}).outcome.status is ToolOutcomeStatus.EMPTY


def test_approval_required_tools_do_not_run_without_a_claim() -> None:
    ran: list[str] = []

    @governed_tool(side_effects=True, deterministic=False, approval_reason="Sends money")
    def pay(amount: int) -> str:
        """Pay."""
        ran.append("paid")
        return "paid"

    refused = pay.dispatch({"amount": 5})
    assert refused.error is not None and refused.error.code == "approval_required"
    assert ran == []
    assert pay.dispatch({"amount": 5}, approved=True).value == "paid"
    assert ran == ["paid"]


def test_async_tools() -> None:
    @governed_tool
    async def fetch(key: str) -> dict[str, str]:
        """Fetch."""
        await asyncio.sleep(0)
        return {"key": key}

    assert fetch.dispatch({"key": "k"}).value == {"key": "k"}
    assert asyncio.run(fetch.adispatch({"key": "k"})).value == {"key": "k"}
    assert asyncio.run(inventory_lookup.adispatch({"sku": "A1"})).ok


def test_mapping_arguments_that_are_not_json_data_are_refused() -> None:
    result = inventory_lookup.dispatch({"sku": object()})
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert calls == []


def test_async_tool_requiring_approval_runs_when_approved() -> None:
    @governed_tool(side_effects=True, deterministic=False)
    async def publish(text: str) -> dict[str, str]:
        """Publish."""
        await asyncio.sleep(0)
        return {"published": text}

    assert publish.dispatch({"text": "hi"}).error is not None
    assert publish.dispatch({"text": "hi"}, approved=True).value == {"published": "hi"}
