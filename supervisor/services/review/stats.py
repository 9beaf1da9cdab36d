"""Statistics of reviewed trace rows: outcome mix, per-tool figures and approval latency.

Computed from the indexed rows alone, so a ledger and an exported JSONL trace give the same
figures, and a filtered selection gets its own. ``ReviewStats`` grows chunk by chunk: from rows
(:meth:`ReviewStats.add`) or, as the review index does, from SQL counts per kind, tool and
status (:meth:`ReviewStats.count`) plus the rows naming a proposal in timeline order
(:meth:`ReviewStats.proposal_event`).
Outcome figures count ``tool_result`` rows, as the analyzer does. An approval's latency is the
time from its ``approval`` row with status ``pending`` to the next row naming the same proposal
(the decision or the approved call's result).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from supervisor.analysis.analyzer import percentile
from supervisor.analysis.stats import ToolStats

if TYPE_CHECKING:
    from supervisor.services.review.rows import ReviewRow

#: Upper bounds (seconds) of the approval-latency histogram buckets; the last one is open.
LATENCY_BUCKETS: tuple[tuple[str, float], ...] = (
    ("< 1s", 1.0),
    ("1-10s", 10.0),
    ("10s-1m", 60.0),
    ("1-10m", 600.0),
    ("10m-1h", 3_600.0),
    ("> 1h", float("inf")),
)


@dataclass
class ReviewStats:
    """Figures of a set of rows, grown chunk by chunk with :meth:`add`."""

    events: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    tools: dict[str, ToolStats] = field(default_factory=dict)
    approvals: int = 0
    approval_outcomes: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    _pending_since: dict[str, float] = field(default_factory=dict, repr=False)

    def add(self, rows: Iterable[ReviewRow]) -> None:
        """Count ``rows`` (in timeline order)."""
        for row in rows:
            self.events += 1
            self.count(row.kind, row.tool, row.status)
            if row.proposal:
                self.proposal_event(row.proposal, row.kind, row.status, row.at_ts)

    def count(self, kind: str, tool: str, status: str, times: int = 1) -> None:
        """Count ``times`` rows of ``kind``/``tool``/``status`` (not ``events``)."""
        if kind == "tool_result":
            self.outcomes[status or "unknown"] += times
            self._tool(tool).add_result(status or "unknown", times)
        elif kind == "tool_call":
            self._tool(tool).calls += times
        elif kind == "approval":
            self.approvals += times
            self.approval_outcomes[status or "unknown"] += times

    def proposal_event(self, proposal: str, kind: str, status: str, at_ts: float) -> None:
        """Pair a row naming ``proposal`` with its pending approval (rows in timeline order)."""
        if kind == "approval" and status == "pending":
            self._pending_since.setdefault(proposal, at_ts)
        else:
            started = self._pending_since.pop(proposal, None)
            if started is not None:
                self.latencies.append(max(0.0, at_ts - started))

    def _tool(self, name: str) -> ToolStats:
        tool = name or "(unknown)"
        stats = self.tools.get(tool)
        if stats is None:
            stats = self.tools[tool] = ToolStats(tool)
        return stats

    def latency_percentile(self, p: float) -> float | None:
        """Nearest-rank percentile of the approval latencies in seconds (``None`` if none)."""
        return percentile(self.latencies, p)

    def latency_histogram(self) -> list[tuple[str, int]]:
        """Approval latencies counted per bucket of :data:`LATENCY_BUCKETS`."""
        counts = [0] * len(LATENCY_BUCKETS)
        for seconds in self.latencies:
            for position, (_, bound) in enumerate(LATENCY_BUCKETS):
                if seconds < bound:
                    counts[position] += 1
                    break
        return [(label, count) for (label, _), count in zip(LATENCY_BUCKETS, counts, strict=True)]


def compute_stats(rows: Iterable[ReviewRow]) -> ReviewStats:
    """Statistics of ``rows``."""
    stats = ReviewStats()
    stats.add(rows)
    return stats
