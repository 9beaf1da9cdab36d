"""The dispatcher's fast path gives exactly what the general path gives.

``dispatch()`` fuses ``prepare()`` and ``execute()`` (and skips work for plain JSON records), so
for every tool and every argument text a model could send, it must produce the same result as
``prepare()`` followed by ``execute()``: the same value, outcome, error, arguments and calls of
the function. ``adispatch()`` must agree with ``prepare()`` + ``aexecute()`` and with
``dispatch()``. The tools below cover valid, invalid, approval-required and raising calls, sync
and async, and every kind of result (plain record, legacy outcome keys, nested data, a reported
outcome, a scalar, a value that is not JSON data).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from supervisor import Secret, ToolOutcome, ToolOutcomeStatus, ToolResult, governed_tool
from supervisor.outcomes import infer_outcome
from supervisor.tools import ToolCallError
from supervisor.tools.dispatch import ToolCallResult, error_result, is_plain_json_record
from supervisor.tools.governed import GovernedTool
from supervisor.tools.results import to_json_value

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=8), st.floats(allow_nan=True)
)
keys = st.one_of(
    st.sampled_from(["ok", "success", "error", "error_code", "results", "items", "degraded"]),
    st.text(max_size=6),
)
records = st.dictionaries(keys, st.one_of(json_scalars, st.lists(st.integers(), max_size=2)))


@given(records)
def test_fast_path_agrees_with_inference(record: dict[str, Any]) -> None:
    if is_plain_json_record(record):
        assert infer_outcome(record) == ToolOutcome()
        assert to_json_value(record) == record


def test_with_latency_keeps_every_other_field() -> None:
    outcome = ToolOutcome(status="fallback", fallback_provider="replica", degraded=True)
    timed = outcome.with_latency(3)
    assert timed.latency_ms == 3.0
    assert timed.model_dump(exclude={"latency_ms"}) == outcome.model_dump(exclude={"latency_ms"})
    assert outcome.latency_ms is None
    assert not math.isnan(timed.latency_ms)


Mode = Literal["plain", "legacy", "nested", "reported", "scalar", "float", "opaque", "raises"]
MODES: tuple[str, ...] = get_args(Mode)
SECRET_TOKEN = "tok-7Q2xVb"
calls: list[dict[str, Any]] = []


def _behave(sku: str, mode: str, count: int, token: str) -> Any:
    """One body for every tool below; ``mode`` picks what kind of result it gives."""
    calls.append({"sku": sku, "mode": mode, "count": count, "token": token})
    if mode == "plain":
        return {"sku": sku, "count": count, "in_stock": count > 0, "note": None}
    if mode == "legacy":
        return {"ok": False, "error": f"{sku} is down", "error_code": "service_unavailable"}
    if mode == "nested":
        return {"rows": [{"sku": sku, "count": count}], "results": count}
    if mode == "reported":
        outcome = ToolOutcome(status=ToolOutcomeStatus.FALLBACK, fallback_provider="replica")
        return ToolResult({"sku": sku}, outcome)
    if mode == "scalar":
        return count
    if mode == "float":
        return {"sku": sku, "ratio": count / 3}
    if mode == "opaque":
        return {"sku": sku, "handle": object()}
    raise ValueError(f"inventory for {sku} failed with token {token}")


def _sync_body(sku: str, mode: Mode, count: int = 1, token: Annotated[str, Secret] = "none") -> Any:
    """Look a SKU up (what it returns depends on ``mode``)."""
    return _behave(sku, mode, count, token)


async def _async_body(
    sku: str, mode: Mode, count: int = 1, token: Annotated[str, Secret] = "none"
) -> Any:
    """Look a SKU up asynchronously (what it returns depends on ``mode``)."""
    await asyncio.sleep(0)
    return _behave(sku, mode, count, token)


def _gated(name: str) -> Callable[[Callable[..., Any]], GovernedTool[..., Any]]:
    return governed_tool(name=name, side_effects=True, deterministic=False, requires_approval=True)


TOOLS: dict[str, GovernedTool[..., Any]] = {
    "sync": governed_tool(name="lookup")(_sync_body),
    "async": governed_tool(name="alookup")(_async_body),
    "sync_gated": _gated("gated_lookup")(_sync_body),
    "async_gated": _gated("agated_lookup")(_async_body),
}

_fields = {
    "sku": st.one_of(st.text(max_size=4), st.integers(), st.none(), st.booleans()),
    "mode": st.one_of(st.sampled_from(MODES), st.just("bogus")),
    "count": st.one_of(st.integers(-3, 3), st.none(), st.just("2"), st.just(1.5)),
    "token": st.one_of(st.just(SECRET_TOKEN), st.none(), st.integers()),
    "approved": st.booleans(),
    "confirm": st.booleans(),
    "proposal_id": st.text(max_size=3),
    "_approval": st.integers(),
    "colour": st.just("red"),
}
#: Mostly valid calls (sku and mode present and well-typed), then anything at all.
_valid = st.fixed_dictionaries(
    {"sku": st.text(max_size=4), "mode": st.sampled_from(MODES)},
    optional={"count": st.integers(-3, 3) | st.none(), "token": st.just(SECRET_TOKEN)},
)
_any = st.fixed_dictionaries({}, optional=_fields)
_objects = st.one_of(_valid, _valid, _any)


def _encoded(body: dict[str, Any], how: str) -> Any:
    text = json.dumps(body)
    if how == "text":
        return text  # what a model sends: the fused fast path
    if how == "spaced":
        return f" {text}"  # JSON text that takes the general parsing path
    if how == "bytes":
        return text.encode()
    return body  # a mapping


_raw = st.sampled_from(
    [None, "", "  ", "not json", "{", '{"sku": "A1"', "[1, 2]", '"A1"', "null", "{}", b"{}"]
)
arguments = st.one_of(
    st.builds(_encoded, _objects, st.sampled_from(["text", "text", "spaced", "bytes", "mapping"])),
    _raw,
    st.builds(lambda: {"sku": object(), "mode": "plain"}),  # a mapping that is not JSON data
)


@dataclass(frozen=True)
class Observed:
    """Everything a caller can see of one call, with timing reduced to "was it measured"."""

    calls: tuple[str, ...]
    tool_name: str
    value: Any
    outcome: ToolOutcome
    error: tuple[Any, ...] | None
    arguments: dict[str, Any] | None
    measured: bool
    ok: bool
    evidence: dict[str, Any]
    model_content: str


def _error_view(error: ToolCallError | None) -> tuple[Any, ...] | None:
    if error is None:
        return None
    # The traceback's frames differ with the caller (dispatch vs execute); its last line, the
    # exception with secrets redacted, does not.
    detail = error.detail.splitlines()[-1] if error.detail else None
    return (error.code, error.message, error.tool_name, error.problems, detail)


def observe(call: Callable[[], ToolCallResult]) -> Observed:
    calls.clear()
    result = call()
    made = tuple(json.dumps(made_call, sort_keys=True) for made_call in calls)
    evidence = result.evidence()
    latency = evidence.pop("latency_ms", None)
    assert (latency is None) == (result.latency_ms is None)
    assert result.latency_ms is None or result.latency_ms >= 0
    if result.error is not None and result.error.detail is not None:
        assert SECRET_TOKEN not in result.error.detail
    return Observed(
        made, result.tool_name, result.value, result.outcome, _error_view(result.error),
        result.arguments, result.latency_ms is not None, result.ok, evidence,
        result.model_content(),
    )  # fmt: skip


def prepare_then_execute(tool: GovernedTool[..., Any], raw: Any, approved: bool) -> ToolCallResult:
    try:
        prepared = tool.prepare(raw)
    except ToolCallError as error:
        return error_result(tool.name, error)
    return tool.execute(prepared, approved=approved)


async def prepare_then_aexecute(
    tool: GovernedTool[..., Any], raw: Any, approved: bool
) -> ToolCallResult:
    try:
        prepared = tool.prepare(raw)
    except ToolCallError as error:
        return error_result(tool.name, error)
    return await tool.aexecute(prepared, approved=approved)


_property = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
_examples = [
    ('{"sku": "A1", "mode": "plain"}', False),
    ('{"sku": "A1", "mode": "plain", "count": null}', True),
    ('{"sku": "A1", "mode": "legacy"}', True),
    (f'{{"sku": "A1", "mode": "raises", "token": "{SECRET_TOKEN}"}}', True),
    ('{"sku": "A1", "mode": "opaque"}', True),
    ('{"sku": "A1", "mode": "plain", "approved": true}', True),
]


def _with_examples(test: Callable[..., None]) -> Callable[..., None]:
    for raw, approved in _examples:
        test = example(raw=raw, approved=approved)(test)
    return test


@pytest.mark.parametrize("kind", sorted(TOOLS))
@_property
@_with_examples
@given(raw=arguments, approved=st.booleans())
def test_dispatch_gives_what_prepare_and_execute_give(kind: str, raw: Any, approved: bool) -> None:
    tool = TOOLS[kind]
    fused = observe(lambda: tool.dispatch(raw, approved=approved))
    general = observe(lambda: prepare_then_execute(tool, raw, approved))
    assert fused == general


@pytest.mark.parametrize("kind", sorted(TOOLS))
@_property
@_with_examples
@given(raw=arguments, approved=st.booleans())
def test_adispatch_gives_what_prepare_and_aexecute_and_dispatch_give(
    kind: str, raw: Any, approved: bool
) -> None:
    tool = TOOLS[kind]
    fused = observe(lambda: asyncio.run(tool.adispatch(raw, approved=approved)))
    general = observe(lambda: asyncio.run(prepare_then_aexecute(tool, raw, approved)))
    sync = observe(lambda: tool.dispatch(raw, approved=approved))
    assert fused == general == sync


@pytest.mark.parametrize("kind", sorted(TOOLS))
def test_the_properties_reach_every_kind_of_result(kind: str) -> None:
    """The tools give each kind of result the properties compare (so none is vacuous)."""
    tool = TOOLS[kind]
    seen: set[str] = set()
    for mode in MODES:
        result = prepare_then_execute(tool, json.dumps({"sku": "A1", "mode": mode}), True)
        seen.add(result.error.code if result.error else str(result.outcome.status))
    refused = prepare_then_execute(tool, '{"sku": "A1", "mode": "plain"}', False)
    seen.add(refused.error.code if refused.error else "ran unapproved")
    assert {
        "success",
        "provider_error",
        "fallback",
        "tool_exception",
        "result_not_serializable",
    } <= seen
    gated = tool.policy.requires_approval
    assert ("approval_required" in seen) is gated
    assert ("ran unapproved" in seen) is not gated
