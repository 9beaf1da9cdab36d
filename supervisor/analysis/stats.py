"""Per-tool outcome figures, shared by ``supervisor traces analyze`` and the TUI review.

Both count ``tool_result`` evidence by outcome status; the analyzer also knows which results
carried ``degraded`` evidence, the review also counts a tool's calls. One :class:`ToolStats`
holds both and grows result by result (or by SQL counts, as the review index does).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from supervisor.outcomes import USABLE_STATUSES


def rate(part: int, whole: int) -> float | None:
    """``part / whole`` rounded to four places (``None`` when ``whole`` is 0)."""
    return round(part / whole, 4) if whole else None


@dataclass
class ToolStats:
    """Counts of one tool: its calls, and the outcome mix of its results.

    Attributes:
        tool: The tool's name (``(unknown)`` for rows without one).
        calls: ``tool_call`` rows of this tool (the review counts them; the analyzer does not).
        outcomes: Results by outcome status.
        degraded: Results that came back degraded (status ``degraded``, or ``degraded`` in
            the evidence where the evidence is known).
    """

    tool: str
    calls: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    degraded: int = 0

    def add_result(self, status: str, times: int = 1, *, degraded: bool | None = None) -> None:
        """Count ``times`` results with ``status``; ``degraded`` defaults to what it says."""
        self.outcomes[status] += times
        if degraded if degraded is not None else status == "degraded":
            self.degraded += times

    @property
    def results(self) -> int:
        """Number of ``tool_result`` rows of this tool."""
        return sum(self.outcomes.values())

    @property
    def by_status(self) -> dict[str, int]:
        """Results by status, statuses in alphabetical order."""
        return dict(sorted(self.outcomes.items()))

    @property
    def usable(self) -> int:
        """Results whose outcome is usable (success, empty, degraded, fallback)."""
        return sum(count for status, count in self.outcomes.items() if status in USABLE_STATUSES)

    @property
    def usable_ratio(self) -> float:
        """Share of results that are usable, unrounded (0.0 without results)."""
        total = self.results
        return self.usable / total if total else 0.0

    @property
    def usable_rate(self) -> float:
        """Share of results that are usable, to four places (0.0 without results)."""
        return rate(self.usable, self.results) or 0.0

    @property
    def fallback_rate(self) -> float:
        """Share of results with status ``fallback``, to four places."""
        return rate(self.outcomes.get("fallback", 0), self.results) or 0.0

    @property
    def degraded_rate(self) -> float:
        """Share of results that came back degraded, to four places."""
        return rate(self.degraded, self.results) or 0.0

    def report(self) -> dict[str, Any]:
        """The figures ``supervisor traces analyze --json`` reports for this tool."""
        return {
            "tool": self.tool,
            "results": self.results,
            "by_status": self.by_status,
            "usable": self.usable,
            "usable_rate": self.usable_rate,
            "fallback_rate": self.fallback_rate,
            "degraded_rate": self.degraded_rate,
        }
