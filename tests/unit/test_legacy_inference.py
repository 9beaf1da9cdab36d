"""Legacy outcome inference: structure decides, prose never does, values are never mutated."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from supervisor.outcomes import (
    PROVIDER_FAILURE_CODES,
    ToolOutcome,
    ToolOutcomeStatus,
    ToolResult,
    infer_outcome,
    is_provider_failure,
    resolve_outcome,
)

S = ToolOutcomeStatus

# One row per rule in the legacy.py docstring table: (value, expected evidence subset).
TABLE: list[Any] = [
    # ok / success exactly False
    pytest.param({"ok": False}, {"status": "error", "reason_code": None}, id="ok-false"),
    pytest.param({"success": False}, {"status": "error"}, id="success-false"),
    pytest.param(
        {"ok": False, "error_code": "invalid_sku", "error": {"code": "x"}, "code": "y"},
        {"status": "error", "reason_code": "invalid_sku"},
        id="ok-false-reason-from-error-code-first",
    ),
    pytest.param(
        {"ok": False, "error": {"code": "invalid_sku"}, "code": "y"},
        {"status": "error", "reason_code": "invalid_sku"},
        id="ok-false-reason-from-error-dot-code",
    ),
    pytest.param(
        {"success": False, "code": "permission_denied"},
        {"status": "error", "reason_code": "permission_denied"},
        id="success-false-reason-from-code",
    ),
    # provider failures, by reason code
    pytest.param(
        {"ok": False, "code": "rate_limited"},
        {"status": "provider_error", "reason_code": "rate_limited"},
        id="ok-false-provider-code",
    ),
    pytest.param(
        {"ok": False, "error_code": "provider_down"},
        {"status": "provider_error", "reason_code": "provider_down"},
        id="provider-prefix",
    ),
    pytest.param(
        {"success": False, "error": {"code": "upstream_502"}},
        {"status": "provider_error", "reason_code": "upstream_502"},
        id="upstream-prefix",
    ),
    # structured error codes without ok / success
    pytest.param(
        {"error_code": "invalid_sku"},
        {"status": "error", "reason_code": "invalid_sku"},
        id="error-code-alone",
    ),
    pytest.param(
        {"error": {"code": "quota_exceeded", "message": "try later"}},
        {"status": "provider_error", "reason_code": "quota_exceeded"},
        id="nested-error-code-alone",
    ),
    pytest.param(
        {"ok": True, "error_code": "service_unavailable"},
        {"status": "provider_error", "reason_code": "service_unavailable"},
        id="error-code-beats-ok-true",
    ),
    # error beats empty / fallback / degraded, and carries no count
    pytest.param(
        {"ok": False, "results": [], "fallback_used": True, "degraded": True},
        {"status": "error", "result_count": None, "fallback_used": False, "degraded": False},
        id="error-beats-flags-and-empty",
    ),
    pytest.param(
        {"error_code": "bad_query", "items": [1, 2]},
        {"status": "error", "result_count": None},
        id="error-drops-count",
    ),
    # collections
    pytest.param({"results": []}, {"status": "empty", "result_count": 0}, id="results-empty"),
    pytest.param({"items": []}, {"status": "empty", "result_count": 0}, id="items-empty"),
    pytest.param({"matches": []}, {"status": "empty", "result_count": 0}, id="matches-empty"),
    pytest.param(
        {"results": [1, 2, 3]}, {"status": "success", "result_count": 3}, id="results-nonempty"
    ),
    pytest.param(
        {"results": "none", "items": [], "matches": [1]},
        {"status": "empty", "result_count": 0},
        id="first-list-in-key-order-counts",
    ),
    pytest.param([], {"status": "empty", "result_count": 0}, id="bare-list-empty"),
    pytest.param([{"a": 1}, {"b": 2}], {"status": "success", "result_count": 2}, id="bare-list"),
    pytest.param((), {"status": "empty", "result_count": 0}, id="bare-tuple-empty"),
    # fallback
    pytest.param(
        {
            "fallback_used": True,
            "primary_provider": "vector_db",
            "fallback_provider": "keyword_index",
            "results": [1],
        },
        {
            "status": "fallback",
            "fallback_used": True,
            "primary_provider": "vector_db",
            "fallback_provider": "keyword_index",
            "result_count": 1,
        },
        id="fallback",
    ),
    pytest.param(
        {"fallback_used": True, "results": []},
        {"status": "fallback", "fallback_used": True, "result_count": 0},
        id="empty-fallback-stays-fallback",
    ),
    pytest.param(
        {"fallback_used": True, "primary_provider": "db", "fallback_provider": "db"},
        {"status": "fallback", "primary_provider": None, "fallback_provider": "db"},
        id="fallback-same-provider-names-keeps-the-one-that-served",
    ),
    # degraded
    pytest.param(
        {"degraded": True, "items": [1, 2]},
        {"status": "degraded", "degraded": True, "result_count": 2},
        id="degraded",
    ),
    pytest.param(
        {"degraded": True, "matches": []},
        {"status": "degraded", "degraded": True, "result_count": 0},
        id="empty-degraded-stays-degraded",
    ),
    pytest.param(
        {"degraded": True, "fallback_used": True},
        {"status": "fallback", "degraded": True, "fallback_used": True},
        id="fallback-and-degraded-coexist",
    ),
    # anything else
    pytest.param("rows: 3", {"status": "success", "result_count": None}, id="string"),
    pytest.param(42, {"status": "success"}, id="number"),
    pytest.param(None, {"status": "success"}, id="none"),
    pytest.param({"sku": "A-1", "qty": 0}, {"status": "success"}, id="plain-dict"),
]

# Values whose text mentions failure but whose structure does not: all clean successes.
PROSE: list[Any] = [
    pytest.param({"message": "error-free run"}, id="message"),
    pytest.param("error: none", id="string-error-none"),
    pytest.param({"status": "failed to find any errors"}, id="status-prose"),
    pytest.param({"error": "none"}, id="error-string"),
    pytest.param({"error": {"message": "timeout"}}, id="error-dict-without-code"),
    pytest.param({"error_code": ""}, id="empty-error-code"),
    pytest.param({"error_code": None, "error": None}, id="null-error-fields"),
    pytest.param({"code": "not_found"}, id="code-without-failure-flag"),
    pytest.param({"ok": 0}, id="ok-zero"),
    pytest.param({"ok": "false"}, id="ok-string-false"),
    pytest.param({"success": None}, id="success-none"),
    pytest.param({"fallback_used": "true", "degraded": 1}, id="non-bool-flags"),
    pytest.param({"result": [], "rows": []}, id="other-collection-keys"),
]


def _evidence_subset(outcome: ToolOutcome, expected: dict[str, Any]) -> dict[str, Any]:
    evidence = outcome.evidence()
    return {key: evidence[key] for key in expected}


@pytest.mark.parametrize(("value", "expected"), TABLE)
def test_inference_table(value: Any, expected: dict[str, Any]) -> None:
    assert _evidence_subset(infer_outcome(value), expected) == expected


@pytest.mark.parametrize("value", PROSE)
def test_prose_never_decides_the_outcome(value: Any) -> None:
    outcome = infer_outcome(value)
    assert outcome.status is S.SUCCESS
    assert outcome.reason_code is None


@pytest.mark.parametrize(
    "value", [pytest.param(row.values[0], id=row.id) for row in [*TABLE, *PROSE]]
)
def test_inference_never_mutates_the_value(value: Any) -> None:
    before = copy.deepcopy(value)
    infer_outcome(value)
    assert value == before


def test_non_identifier_reason_codes_and_provider_names_are_dropped_not_copied() -> None:
    failure = infer_outcome({"ok": False, "error_code": "Customer Jane Doe was not found"})
    assert failure.status is S.ERROR
    assert failure.reason_code is None
    fallback = infer_outcome({"fallback_used": True, "fallback_provider": "the backup db"})
    assert fallback.status is S.FALLBACK
    assert fallback.fallback_provider is None


@pytest.mark.parametrize(
    "value",
    [
        object(),
        b"bytes",
        {1, 2},
        {"error": {"code": 503}},
        {("tuple", "key"): 1},
        {"ok": False, 1: 2},
    ],
)
def test_inference_never_raises_on_unusual_values(value: Any) -> None:
    assert isinstance(infer_outcome(value), ToolOutcome)


@pytest.mark.parametrize(
    ("reason_code", "provider_failure"),
    [
        *[(code, True) for code in sorted(PROVIDER_FAILURE_CODES)],
        ("provider_auth_failed", True),
        ("upstream_502", True),
        ("RATE_LIMITED", True),
        ("invalid_sku", False),
        ("timeout", False),
        ("my_provider_failed", False),
        (None, False),
        ("", False),
    ],
)
def test_provider_failure_reason_codes(reason_code: str | None, provider_failure: bool) -> None:
    assert is_provider_failure(reason_code) is provider_failure


def test_provider_failure_codes_are_the_documented_set() -> None:
    assert (
        frozenset(
            {
                "rate_limited",
                "quota_exceeded",
                "service_unavailable",
                "upstream_timeout",
                "provider_unavailable",
            }
        )
        == PROVIDER_FAILURE_CODES
    )


def test_resolve_unwraps_a_tool_result_and_keeps_its_outcome() -> None:
    rows = [{"sku": "A-1"}]
    outcome = ToolOutcome(status=S.FALLBACK, fallback_provider="inventory_replica", result_count=1)
    value, resolved = resolve_outcome(ToolResult(rows, outcome))
    assert value is rows
    assert resolved is outcome


def test_resolve_infers_from_the_value_when_a_tool_result_has_no_outcome() -> None:
    value, resolved = resolve_outcome(ToolResult({"results": []}))
    assert value == {"results": []}
    assert resolved.status is S.EMPTY


def test_host_outcome_beats_what_the_value_looks_like() -> None:
    stated = ToolOutcome(status=S.SUCCESS, result_count=0)
    _, resolved = resolve_outcome(ToolResult({"ok": False}, stated))
    assert resolved is stated


def test_resolve_passes_a_plain_value_through_with_its_inferred_outcome() -> None:
    payload = {"ok": False, "error_code": "rate_limited"}
    value, resolved = resolve_outcome(payload)
    assert value is payload
    assert resolved.status is S.PROVIDER_ERROR
    assert not resolved.usable


def test_infer_outcome_of_a_tool_result_is_its_stated_outcome() -> None:
    stated = ToolOutcome(status=S.DEGRADED)
    assert infer_outcome(ToolResult([1, 2], stated)) is stated
