"""The shared shapes of what a run reports: outcome records, blob references, tool stats."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from supervisor.analysis.stats import ToolStats
from supervisor.errors import model_error
from supervisor.outcomes import EVIDENCE_KEYS, OutcomeRecord, ToolOutcome, ToolOutcomeStatus
from supervisor.outcomes.blobref import BlobRef
from supervisor.runtime.results import RunResult
from supervisor.runtime.state import RunState
from supervisor.tools.errors import ArgumentProblem, ToolCallError

HEX = "ab" * 32


def _plain(**extra: Any) -> dict[str, Any]:
    base = {"tool_name": "lookup", "call_id": "c1", "status": "fallback", "reason_code": "slow",
            "provider": None, "fallback_provider": "replica", "degraded": False,
            "result_count": 2, "latency_ms": 1.5}  # fmt: skip
    return {**base, **extra}


def _record(**extra: Any) -> OutcomeRecord:
    outcome = ToolOutcome(
        status=ToolOutcomeStatus.FALLBACK, reason_code="slow", primary_provider="primary",
        fallback_provider="replica", result_count=2, latency_ms=1.5,
    )  # fmt: skip
    return OutcomeRecord.of("lookup", "c1", outcome.evidence(), **extra)


def test_a_record_reads_compares_and_dumps_like_the_dict_it_replaces() -> None:
    record = _record()
    assert record == _plain() and _plain() == record
    assert record["tool_name"] == "lookup" and record.get("reason_code") == "slow"
    assert list(record) == list(_plain()) and len(record) == len(_plain())
    assert "refused_calls" not in record and record.get("refused_calls") is None
    assert json.dumps(record.as_dict()) == json.dumps(_plain())
    with pytest.raises(KeyError):
        record["primary_provider"]  # not kept: the record keeps what the run reports


def test_refused_calls_is_a_key_only_when_set() -> None:
    record = _record(refused_calls=3)
    assert record == _plain(refused_calls=3) and record["refused_calls"] == 3


def test_results_and_checkpoints_serialise_records_as_plain_dicts() -> None:
    records = [_record(), _record(refused_calls=2)]
    result = RunResult(status="completed", agent_id="a", thread_id="t", run_id="r",
                       outcomes=records)  # fmt: skip
    assert json.loads(result.model_dump_json())["outcomes"] == [_plain(), _plain(refused_calls=2)]
    state = RunState(run_id="r", outcomes=records)
    dumped = state.model_dump(mode="json")
    assert dumped["outcomes"] == [_plain(), _plain(refused_calls=2)]
    assert RunState.model_validate(dumped).outcomes == records


def test_a_checkpoint_record_with_an_unknown_key_is_refused() -> None:
    with pytest.raises(ValidationError):
        RunState.model_validate({"run_id": "r", "outcomes": [_plain(secret="x")]})


def test_evidence_has_every_key_in_order() -> None:
    assert tuple(ToolOutcome().evidence()) == EVIDENCE_KEYS


def test_blob_refs_parse_and_format_both_forms() -> None:
    ref = BlobRef(HEX)
    assert ref.pointer == f"sha256:{HEX}" and ref.result_ref == f"blob:{HEX}"
    assert BlobRef.from_pointer(ref.pointer) == BlobRef.from_pointer(HEX) == ref
    assert BlobRef.from_result_ref(ref.result_ref) == ref
    assert BlobRef.parse(ref.pointer) == BlobRef.parse(ref.result_ref) == BlobRef.parse(HEX)


@pytest.mark.parametrize(
    "text", ["", "sha256:", HEX[:-1], HEX.upper(), f"blob:{HEX}", f"sha256:blob:{HEX}"]
)
def test_a_malformed_pointer_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        BlobRef.from_pointer(text)


def test_a_result_ref_needs_its_prefix() -> None:
    with pytest.raises(ValueError):
        BlobRef.from_result_ref(HEX)


def test_tool_call_errors_tell_the_model_code_message_and_the_argument() -> None:
    problems = (
        ArgumentProblem("invalid_arguments", "sku", "string", "sku must be a string"),
        ArgumentProblem("missing_argument", "n", "", "n is required"),
    )
    error = ToolCallError("invalid_arguments", "Bad arguments.", "lookup", problems, "trace only")
    assert json.dumps(error.to_model()) == json.dumps(
        model_error(
            "invalid_arguments",
            "Bad arguments.",
            argument="sku",
            expected="string",
            problems=[problem.to_dict() for problem in problems],
        )
    )
    assert "trace only" not in json.dumps(error.to_model())


def test_tool_stats_count_results_and_rates() -> None:
    stats = ToolStats("lookup")
    stats.add_result("success", 2)
    stats.add_result("fallback", degraded=True)
    stats.add_result("error")
    assert (stats.results, stats.usable, stats.degraded) == (4, 3, 1)
    assert stats.by_status == {"error": 1, "fallback": 1, "success": 2}
    assert (stats.usable_rate, stats.fallback_rate, stats.degraded_rate) == (0.75, 0.25, 0.25)
    assert stats.report()["usable"] == 3 and ToolStats("idle").usable_rate == 0.0
