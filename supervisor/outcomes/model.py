"""Structured tool outcomes: how a tool's execution went, separate from what it returned.

A tool returns its value unchanged for the model; the host may wrap it in a :class:`ToolResult`
carrying a :class:`ToolOutcome` so the SDK, trace, CLI and cache admission learn whether the
call was a clean primary-provider success, an empty read, a degraded or fallback result, or a
failure. Outcomes carry content-free evidence only (status, codes, provider names, counts,
timings), never the value or the call's arguments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from supervisor.errors import OutcomeError

ValueT = TypeVar("ValueT")

# Identifier-shaped strings only: no spaces, so prose and payload fragments cannot ride along
# inside evidence that is meant to be content-free.
REASON_CODE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
PROVIDER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,127}$"


class ToolOutcomeStatus(StrEnum):
    """How a tool call went; the first four statuses still produced a usable result."""

    SUCCESS = "success"
    """The primary path completed normally."""
    EMPTY = "empty"
    """A read completed but returned no records."""
    DEGRADED = "degraded"
    """The result is usable with reduced capability."""
    FALLBACK = "fallback"
    """A usable alternate path completed the operation."""
    PROVIDER_ERROR = "provider_error"
    """No provider path produced a usable result."""
    ERROR = "error"
    """A non-provider execution or validation failure."""

    @property
    def usable(self) -> bool:
        """Whether a call with this status still produced a result the caller can use."""
        return self in USABLE_STATUSES


USABLE_STATUSES: frozenset[ToolOutcomeStatus] = frozenset(
    {
        ToolOutcomeStatus.SUCCESS,
        ToolOutcomeStatus.EMPTY,
        ToolOutcomeStatus.DEGRADED,
        ToolOutcomeStatus.FALLBACK,
    }
)
"""Statuses whose result is usable; everything else is a failure."""

_NO_RESULTS = frozenset(
    {ToolOutcomeStatus.EMPTY, ToolOutcomeStatus.PROVIDER_ERROR, ToolOutcomeStatus.ERROR}
)
_MAY_NAME_FALLBACK = frozenset({ToolOutcomeStatus.FALLBACK, ToolOutcomeStatus.PROVIDER_ERROR})


_LATENCY = frozenset({"latency_ms"})

EVIDENCE_KEYS: tuple[str, ...] = (
    "status", "reason_code", "provider", "primary_provider", "fallback_provider", "retryable",
    "result_count", "degraded", "fallback_used", "latency_ms",
)  # fmt: skip
"""The keys of :meth:`ToolOutcome.evidence`, in order: every field of an outcome."""


class ToolOutcome(BaseModel):
    """Content-free evidence of how one tool call went.

    ``status`` accepts a :class:`ToolOutcomeStatus` or its string value. When not given,
    ``fallback_used`` is set to True for status ``fallback``, ``degraded`` to True for status
    ``degraded``, and ``result_count`` to 0 for status ``empty``.

    Coherence rules, each refused at construction with :class:`~supervisor.errors.OutcomeError`:

    1. Status ``fallback`` means ``fallback_used=True``; ``fallback_used=True`` with any other
       status is refused, so a fallback is always visible as the display status.
    2. Status ``degraded`` means ``degraded=True``. ``degraded=True`` is allowed only with status
       ``degraded`` or ``fallback`` (fallback and degradation coexist, fallback stays the display
       status); on ``success`` it would hide the quality loss, and on ``empty`` or a failure
       there is no result to be degraded (use status ``degraded`` with ``result_count=0``).
    3. ``provider_error``, ``error`` and ``empty`` with ``result_count > 0`` are refused: those
       statuses produced no records.
    4. ``fallback_provider`` names the alternate path, so only ``fallback`` (the path that
       served) and ``provider_error`` (the alternate that was tried and also failed) carry it.
    5. ``primary_provider`` and ``fallback_provider`` must differ when both are set.

    Shape errors (unknown fields, wrong types, negative counts or latencies, reason codes or
    provider names with spaces) are pydantic's ``ValidationError``. Both are ``ValueError``.
    ``model_validate`` reports coherence refusals inside a ``ValidationError`` as well, since
    that is pydantic's contract for deserialisation.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: ToolOutcomeStatus = ToolOutcomeStatus.SUCCESS
    reason_code: str | None = Field(default=None, pattern=REASON_CODE_PATTERN)
    provider: str | None = Field(default=None, pattern=PROVIDER_NAME_PATTERN)
    primary_provider: str | None = Field(default=None, pattern=PROVIDER_NAME_PATTERN)
    fallback_provider: str | None = Field(default=None, pattern=PROVIDER_NAME_PATTERN)
    retryable: bool = Field(default=False, strict=True)
    result_count: int | None = Field(default=None, ge=0, strict=True)
    degraded: bool = Field(default=False, strict=True)
    fallback_used: bool = Field(default=False, strict=True)
    latency_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    if not TYPE_CHECKING:
        # Hidden from mypy so the pydantic plugin keeps the typed keyword signature.
        def __init__(self, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                refusal = _outcome_error_in(exc)
                if refusal is None:
                    raise
                raise refusal from None

    @model_validator(mode="before")
    @classmethod
    def _fill_implied_fields(cls, data: Any) -> Any:
        """Set the fields a status implies, unless the caller gave them explicitly."""
        if not isinstance(data, Mapping):
            return data
        try:
            status = ToolOutcomeStatus(data.get("status", ToolOutcomeStatus.SUCCESS))
        except ValueError:
            return data  # field validation reports the bad status
        implied: dict[str, Any] = {}
        if status is ToolOutcomeStatus.FALLBACK and "fallback_used" not in data:
            implied["fallback_used"] = True
        if status is ToolOutcomeStatus.DEGRADED and "degraded" not in data:
            implied["degraded"] = True
        if status is ToolOutcomeStatus.EMPTY and "result_count" not in data:
            implied["result_count"] = 0
        return {**data, **implied} if implied else data

    @model_validator(mode="after")
    def _check_coherence(self) -> Self:
        """Refuse outcomes whose fields contradict each other (see the class docstring)."""
        status = self.status
        evidence = self.evidence()
        if status is ToolOutcomeStatus.FALLBACK and not self.fallback_used:
            raise OutcomeError(
                "status 'fallback' with fallback_used=False contradicts itself.",
                hint="Drop fallback_used (it defaults to True for a fallback) or pick the "
                "status that describes the path that ran.",
                outcome=evidence,
            )
        if self.fallback_used and status is not ToolOutcomeStatus.FALLBACK:
            raise OutcomeError(
                f"fallback_used=True with status {status.value!r} hides the fallback.",
                hint="Use status 'fallback' (with degraded=True if quality was reduced), or "
                "'provider_error' if the fallback did not satisfy the operation.",
                outcome=evidence,
            )
        if status is ToolOutcomeStatus.DEGRADED and not self.degraded:
            raise OutcomeError(
                "status 'degraded' with degraded=False contradicts itself.",
                hint="Drop degraded (it defaults to True for status 'degraded').",
                outcome=evidence,
            )
        if self.degraded and status not in {ToolOutcomeStatus.DEGRADED, ToolOutcomeStatus.FALLBACK}:
            raise OutcomeError(
                f"degraded=True with status {status.value!r} hides or misplaces the quality loss.",
                hint="Use status 'degraded' (result_count=0 if nothing came back), or status "
                "'fallback' with degraded=True when an alternate path served a reduced result.",
                outcome=evidence,
            )
        if status in _NO_RESULTS and self.result_count:
            raise OutcomeError(
                f"status {status.value!r} claims {self.result_count} results but produced none.",
                hint="Use status 'success', 'degraded' or 'fallback' for a call that returned "
                "records, or drop result_count.",
                outcome=evidence,
            )
        if self.fallback_provider is not None and status not in _MAY_NAME_FALLBACK:
            raise OutcomeError(
                f"fallback_provider is set but status {status.value!r} says no fallback served.",
                hint="Use status 'fallback' when the alternate path served the call, "
                "'provider_error' when it was tried and failed, or drop fallback_provider.",
                outcome=evidence,
            )
        if self.primary_provider is not None and self.primary_provider == self.fallback_provider:
            raise OutcomeError(
                f"primary_provider and fallback_provider are both {self.primary_provider!r}.",
                hint="Name the provider that failed as primary_provider and the different one "
                "that took over as fallback_provider.",
                outcome=evidence,
            )
        return self

    @property
    def usable(self) -> bool:
        """Whether the call still produced a result the caller can use."""
        return self.status.usable

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Copy this outcome; with ``update`` the copy is validated like a new outcome.

        Raises:
            OutcomeError: The updated fields contradict each other.
            pydantic.ValidationError: An updated field has the wrong shape.
        """
        if not update:
            return super().model_copy(deep=deep)
        return type(self)(**{**self.model_dump(exclude_unset=True), **update})

    def with_latency(self, ms: float) -> ToolOutcome:
        """Return a copy with ``latency_ms`` set, for hosts that time the call after it returns.

        Args:
            ms: Wall-clock duration of the call in milliseconds; finite and non-negative.

        Returns:
            A new outcome; this one is unchanged.

        Raises:
            pydantic.ValidationError: ``ms`` is negative, NaN or infinite.
        """
        if type(ms) is int:
            ms = float(ms)
        if type(ms) is not float or not 0.0 <= ms < math.inf:
            return self.model_copy(update={"latency_ms": ms})  # raises the validation error
        # Only latency changes and it takes no part in coherence: copy without revalidating.
        fields = self.__dict__.copy()
        fields["latency_ms"] = ms
        timed = object.__new__(type(self))
        object.__setattr__(timed, "__dict__", fields)
        object.__setattr__(
            timed, "__pydantic_fields_set__", self.__pydantic_fields_set__ | _LATENCY
        )
        object.__setattr__(timed, "__pydantic_extra__", None)
        object.__setattr__(timed, "__pydantic_private__", None)
        return timed

    def evidence(self) -> dict[str, Any]:
        """The content-free evidence traces, the CLI and the analyzer record.

        Returns:
            A JSON-ready dict of status (as a string), reason code, provider names, retryable,
            result count, degraded, fallback_used and latency. It never holds the tool's value
            or its arguments.
        """
        evidence = {key: getattr(self, key) for key in EVIDENCE_KEYS}
        evidence["status"] = self.status.value
        return evidence


def _outcome_error_in(exc: ValidationError) -> OutcomeError | None:
    """The coherence refusal pydantic wrapped, so constructors can raise it unwrapped."""
    for detail in exc.errors():
        wrapped = detail.get("ctx", {}).get("error")
        if isinstance(wrapped, OutcomeError):
            return wrapped
    return None


@dataclass(frozen=True, slots=True)
class ToolResult(Generic[ValueT]):
    """A tool's return value plus how its execution went.

    The SDK unwraps it: the model only ever receives ``value``, so the tool's result schema is
    unchanged, while ``outcome`` becomes trace and cache-admission evidence. ``outcome=None``
    means the host does not know, and the outcome is inferred from the value's structure.

    Raises:
        OutcomeError: ``value`` is itself a ToolResult, or ``outcome`` is not a ToolOutcome.
    """

    value: ValueT
    outcome: ToolOutcome | None = None

    def __post_init__(self) -> None:
        if isinstance(self.value, ToolResult):
            raise OutcomeError(
                "A ToolResult cannot wrap another ToolResult.",
                hint="Return the inner ToolResult as is, or wrap its .value with one outcome.",
            )
        if self.outcome is not None and not isinstance(self.outcome, ToolOutcome):
            raise OutcomeError(
                f"ToolResult.outcome must be a ToolOutcome, not {type(self.outcome).__name__}.",
                hint="Build it with ToolOutcome(status=..., ...) or pass outcome=None to infer it.",
            )
