"""Structured tool outcomes: statuses, the outcome model, ToolResult and legacy inference.

See ``docs/outcomes.md`` for the statuses, the coherence rules and the legacy-inference table.
"""

from __future__ import annotations

from supervisor.outcomes.legacy import (
    PROVIDER_FAILURE_CODES,
    infer_outcome,
    is_provider_failure,
    resolve_outcome,
)
from supervisor.outcomes.model import (
    EVIDENCE_KEYS,
    USABLE_STATUSES,
    ToolOutcome,
    ToolOutcomeStatus,
    ToolResult,
)
from supervisor.outcomes.record import OutcomeRecord

__all__ = [
    "EVIDENCE_KEYS",
    "PROVIDER_FAILURE_CODES",
    "USABLE_STATUSES",
    "OutcomeRecord",
    "ToolOutcome",
    "ToolOutcomeStatus",
    "ToolResult",
    "infer_outcome",
    "is_provider_failure",
    "resolve_outcome",
]
