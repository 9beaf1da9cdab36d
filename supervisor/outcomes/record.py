"""The outcome record: content-free evidence of one tool call of a run, as the host reports it.

``RunResult.outcomes``, ``ApprovalResumeResult.outcome`` and the run state in a checkpoint hold
:class:`OutcomeRecord` values. A record reads like the plain dict the seed documents
(``outcome["tool_name"]``, ``outcome.get("reason_code")``), compares equal to that dict, and is
stored and serialised as exactly that dict, so checkpoints and JSON output keep their shape.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema


@dataclass(frozen=True, slots=True, eq=False)
class OutcomeRecord(Mapping[str, Any]):
    """One call's evidence: which call, and how it went (never its arguments or value).

    Attributes:
        tool_name: The tool the model called.
        call_id: The model's id of the call.
        status: An outcome status (``success``...) or the decision that stopped the call.
        reason_code: Why, as a stable code.
        provider: The provider that answered.
        fallback_provider: The alternate provider, when one answered.
        degraded: Whether the result came with reduced capability.
        result_count: How many records came back.
        latency_ms: How long the tool ran.
        refused_calls: For the one record standing for every call over the per-turn cap: how
            many were refused. A key of the record only when set.
    """

    tool_name: str
    call_id: str
    status: str | None = None
    reason_code: str | None = None
    provider: str | None = None
    fallback_provider: str | None = None
    degraded: bool | None = None
    result_count: int | None = None
    latency_ms: float | None = None
    refused_calls: int | None = None

    @classmethod
    def of(
        cls,
        tool_name: str,
        call_id: str,
        evidence: Mapping[str, Any],
        *,
        refused_calls: int | None = None,
    ) -> OutcomeRecord:
        """The record of one call from its outcome evidence (missing keys stay ``None``)."""
        picked = {key: evidence.get(key) for key in _EVIDENCE_KEPT}
        return cls(tool_name, call_id, **picked, refused_calls=refused_calls)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OutcomeRecord:
        """A record from its dict form (a checkpoint's), refusing keys it does not have.

        Raises:
            ValueError: ``data`` lacks ``tool_name``/``call_id`` or has an unknown key.
        """
        unknown = set(data) - _FIELD_NAMES
        if unknown or not isinstance(data.get("tool_name"), str):
            raise ValueError(f"not an outcome record: unknown keys {sorted(unknown)}")
        if not isinstance(data.get("call_id"), str):
            raise ValueError("not an outcome record: call_id is not a string")
        return cls(**data)

    def as_dict(self) -> dict[str, Any]:
        """The plain JSON-ready dict: tool_name, call_id, the evidence, refused_calls if set."""
        data = {name: getattr(self, name) for name in _RECORD_KEYS}
        if self.refused_calls is not None:
            data["refused_calls"] = self.refused_calls
        return data

    def __getitem__(self, key: str) -> Any:
        if key in _RECORD_KEYS or (key == "refused_calls" and self.refused_calls is not None):
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(_RECORD_KEYS) + (self.refused_calls is not None)

    def __repr__(self) -> str:
        return f"OutcomeRecord({self.as_dict()!r})"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        """Validated from a record or its dict form; serialised as the dict form."""
        return core_schema.no_info_plain_validator_function(
            _coerce,
            serialization=core_schema.plain_serializer_function_ser_schema(OutcomeRecord.as_dict),
        )


def _coerce(value: Any) -> OutcomeRecord:
    if isinstance(value, OutcomeRecord):
        return value
    if isinstance(value, Mapping):
        return OutcomeRecord.from_dict(value)
    raise ValueError(f"not an outcome record: {type(value).__name__}")


_FIELD_NAMES = frozenset(field.name for field in fields(OutcomeRecord))
#: The keys every record has, in order: which call, then the evidence (see EVIDENCE_FIELDS).
_RECORD_KEYS = tuple(field.name for field in fields(OutcomeRecord) if field.name != "refused_calls")
#: The keys of ``ToolOutcome.evidence()`` a record keeps.
_EVIDENCE_KEPT = _RECORD_KEYS[2:]
