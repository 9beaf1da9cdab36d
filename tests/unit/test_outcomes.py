"""ToolOutcome, ToolOutcomeStatus and ToolResult: statuses, coherence rules and evidence."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from pydantic import ValidationError

from supervisor.errors import OutcomeError
from supervisor.outcomes import (
    USABLE_STATUSES,
    ToolOutcome,
    ToolOutcomeStatus,
    ToolResult,
)

S = ToolOutcomeStatus


def test_statuses_and_usability_match_the_documented_table() -> None:
    assert [status.value for status in S] == [
        "success",
        "empty",
        "degraded",
        "fallback",
        "provider_error",
        "error",
    ]
    assert {status for status in S if status.usable} == {S.SUCCESS, S.EMPTY, S.DEGRADED, S.FALLBACK}
    assert frozenset({S.SUCCESS, S.EMPTY, S.DEGRADED, S.FALLBACK}) == USABLE_STATUSES
    assert not S.PROVIDER_ERROR.usable
    assert not S.ERROR.usable


def test_default_outcome_is_a_clean_success() -> None:
    outcome = ToolOutcome()
    assert outcome.status is S.SUCCESS
    assert outcome.usable
    assert not (outcome.fallback_used or outcome.degraded or outcome.retryable)


@pytest.mark.parametrize("status", [S.FALLBACK, "fallback"])
def test_status_accepts_the_enum_or_its_string_value(status: Any) -> None:
    outcome = ToolOutcome(status=status)
    assert outcome.status is S.FALLBACK


def test_unknown_status_string_is_refused() -> None:
    with pytest.raises(ValidationError):
        ToolOutcome(status="partial")


def test_status_implies_its_flags_and_counts_when_not_given() -> None:
    assert ToolOutcome(status=S.FALLBACK).fallback_used is True
    assert ToolOutcome(status=S.DEGRADED).degraded is True
    assert ToolOutcome(status=S.EMPTY).result_count == 0


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param(
            {"status": S.SUCCESS, "provider": "primary_inventory", "result_count": 1},
            id="seed-success",
        ),
        pytest.param(
            {
                "status": S.FALLBACK,
                "reason_code": "primary_timeout",
                "primary_provider": "primary_inventory",
                "fallback_provider": "inventory_replica",
                "retryable": True,
                "result_count": 3,
            },
            id="seed-fallback",
        ),
        pytest.param({"status": S.FALLBACK, "degraded": True}, id="fallback-and-degraded-coexist"),
        pytest.param({"status": S.FALLBACK, "result_count": 0}, id="fallback-that-found-nothing"),
        pytest.param({"status": S.DEGRADED, "result_count": 0}, id="degraded-that-found-nothing"),
        pytest.param({"status": S.SUCCESS, "result_count": 0}, id="success-with-zero-count"),
        pytest.param(
            {
                "status": S.PROVIDER_ERROR,
                "reason_code": "rate_limited",
                "primary_provider": "search_api",
                "fallback_provider": "search_cache",
                "retryable": True,
            },
            id="provider-error-naming-the-failed-fallback",
        ),
        pytest.param({"status": S.ERROR, "result_count": 0}, id="error-with-zero-count"),
    ],
)
def test_coherent_outcomes_are_accepted(fields: dict[str, Any]) -> None:
    outcome = ToolOutcome(**fields)
    for name, expected in fields.items():
        assert getattr(outcome, name) == expected


INCOHERENT: list[Any] = [
    pytest.param({"status": S.FALLBACK, "fallback_used": False}, "fallback_used=False", id="r1a"),
    pytest.param({"status": S.SUCCESS, "fallback_used": True}, "hides the fallback", id="r1b"),
    pytest.param({"status": S.DEGRADED, "fallback_used": True}, "hides the fallback", id="r1c"),
    pytest.param({"status": S.DEGRADED, "degraded": False}, "degraded=False", id="r2a"),
    pytest.param({"status": S.SUCCESS, "degraded": True}, "quality loss", id="r2b"),
    pytest.param({"status": S.EMPTY, "degraded": True}, "quality loss", id="r2c"),
    pytest.param({"status": S.ERROR, "degraded": True}, "quality loss", id="r2d"),
    pytest.param({"status": S.PROVIDER_ERROR, "result_count": 4}, "claims 4 results", id="r3a"),
    pytest.param({"status": S.ERROR, "result_count": 1}, "claims 1 results", id="r3b"),
    pytest.param({"status": S.EMPTY, "result_count": 2}, "claims 2 results", id="r3c"),
    pytest.param({"status": S.SUCCESS, "fallback_provider": "replica"}, "no fallback", id="r4a"),
    pytest.param({"status": S.EMPTY, "fallback_provider": "replica"}, "no fallback", id="r4b"),
    pytest.param({"status": S.DEGRADED, "fallback_provider": "replica"}, "no fallback", id="r4c"),
    pytest.param({"status": S.ERROR, "fallback_provider": "replica"}, "no fallback", id="r4d"),
    pytest.param(
        {"status": S.FALLBACK, "primary_provider": "db", "fallback_provider": "db"},
        "both 'db'",
        id="r5",
    ),
]


@pytest.mark.parametrize(("fields", "what_is_wrong"), INCOHERENT)
def test_incoherent_outcomes_raise_outcome_error_saying_what_and_what_to_do(
    fields: dict[str, Any], what_is_wrong: str
) -> None:
    with pytest.raises(OutcomeError) as caught:
        ToolOutcome(**fields)
    error = caught.value
    assert not isinstance(error, ValidationError)
    assert error.code == "incoherent_outcome"
    assert what_is_wrong in error.message
    assert error.hint and any(word in error.hint for word in ("Use", "Drop", "Name"))
    assert error.to_dict()["details"]["outcome"]["status"] == S(fields["status"]).value


@pytest.mark.parametrize(("fields", "what_is_wrong"), INCOHERENT)
def test_deserialising_an_incoherent_outcome_is_refused_too(
    fields: dict[str, Any], what_is_wrong: str
) -> None:
    with pytest.raises(ValidationError, match=what_is_wrong):
        ToolOutcome.model_validate(fields)


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"sttaus": "success"}, id="unknown-field"),
        pytest.param({"result_count": -1}, id="negative-count"),
        pytest.param({"result_count": True}, id="bool-count"),
        pytest.param({"latency_ms": -0.5}, id="negative-latency"),
        pytest.param({"latency_ms": math.nan}, id="nan-latency"),
        pytest.param({"latency_ms": math.inf}, id="infinite-latency"),
        pytest.param({"retryable": "yes"}, id="non-bool-flag"),
        pytest.param({"reason_code": "customer 42 not found"}, id="prose-reason-code"),
        pytest.param({"provider": "the primary database"}, id="prose-provider"),
    ],
)
def test_badly_shaped_fields_are_refused_by_validation(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ToolOutcome(**fields)


def test_outcomes_are_immutable() -> None:
    outcome = ToolOutcome()
    with pytest.raises(ValidationError):
        outcome.status = S.ERROR  # type: ignore[misc]


def test_with_latency_returns_a_copy_and_leaves_the_original() -> None:
    outcome = ToolOutcome(status=S.FALLBACK, fallback_provider="replica", result_count=2)
    timed = outcome.with_latency(12.5)
    assert timed.latency_ms == 12.5
    assert outcome.latency_ms is None
    assert timed.model_dump(exclude={"latency_ms"}) == outcome.model_dump(exclude={"latency_ms"})
    with pytest.raises(ValidationError):
        outcome.with_latency(-1.0)


def test_copy_with_update_is_checked_like_a_new_outcome() -> None:
    outcome = ToolOutcome(status=S.FALLBACK)
    with pytest.raises(OutcomeError, match="hides the fallback"):
        outcome.model_copy(update={"status": S.SUCCESS})
    assert outcome.model_copy() == outcome


def test_evidence_is_the_content_free_json_summary() -> None:
    outcome = ToolOutcome(
        status=S.FALLBACK,
        reason_code="primary_timeout",
        primary_provider="primary_inventory",
        fallback_provider="inventory_replica",
        retryable=True,
        result_count=3,
        degraded=True,
        latency_ms=40.0,
    )
    evidence = outcome.evidence()
    assert evidence == {
        "status": "fallback",
        "reason_code": "primary_timeout",
        "provider": None,
        "primary_provider": "primary_inventory",
        "fallback_provider": "inventory_replica",
        "retryable": True,
        "result_count": 3,
        "degraded": True,
        "fallback_used": True,
        "latency_ms": 40.0,
    }
    assert type(evidence["status"]) is str
    assert json.loads(json.dumps(evidence)) == evidence


def test_tool_result_carries_value_and_outcome_positionally() -> None:
    rows = [{"sku": "A-1"}]
    outcome = ToolOutcome(provider="primary_inventory", result_count=1)
    result = ToolResult(rows, outcome)
    assert result.value is rows
    assert result.outcome is outcome
    assert ToolResult(rows).outcome is None


def test_tool_result_refuses_nesting() -> None:
    with pytest.raises(OutcomeError, match="cannot wrap another ToolResult") as caught:
        ToolResult(ToolResult([1], ToolOutcome(result_count=1)))
    assert caught.value.hint


def test_tool_result_refuses_an_outcome_that_is_not_a_tool_outcome() -> None:
    with pytest.raises(OutcomeError, match="must be a ToolOutcome"):
        ToolResult([], {"status": "empty"})  # type: ignore[arg-type]


def test_tool_result_is_immutable() -> None:
    result = ToolResult("value")
    with pytest.raises(AttributeError):
        result.outcome = ToolOutcome()  # type: ignore[misc]
