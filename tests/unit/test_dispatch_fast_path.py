"""The dispatcher's fast path gives exactly what the general path gives."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from supervisor import ToolOutcome
from supervisor.outcomes import infer_outcome
from supervisor.tools.dispatch import is_plain_json_record
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
