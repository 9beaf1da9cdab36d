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
    USABLE_STATUSES,
    ToolOutcome,
    ToolOutcomeStatus,
    ToolResult,
)

__all__ = [
    "PROVIDER_FAILURE_CODES",
    "USABLE_STATUSES",
    "ToolOutcome",
    "ToolOutcomeStatus",
    "ToolResult",
    "infer_outcome",
    "is_provider_failure",
    "resolve_outcome",
]
