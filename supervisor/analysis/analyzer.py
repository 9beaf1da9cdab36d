"""The trace analyzer: how tools and approvals went, from content-free evidence only.

Figures (all restricted to ``since`` when given):

* per tool, from ``tool_result`` events: counts by outcome status, usable rate (success, empty,
  degraded, fallback over all results), fallback rate, degraded rate (``status=degraded`` or
  ``degraded=True`` in the outcome evidence);
* provider error codes (reason codes of ``provider_error`` tool results and model calls);
* approval latency p50/p95 in seconds, from a proposal's ``created_at`` to ``decided_at`` (every
  decided proposal except expired ones, which nobody decided);
* expired and rejected proposal counts, proposals by status;
* top reason codes of tool results.

Arguments and results are never read. Percentiles use the nearest-rank method.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from supervisor.analysis.stats import ToolStats, rate
from supervisor.ledger.models import Proposal, ProposalStatus, TraceEvent
from supervisor.ledger.service import ApprovalLedger

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
TOP_REASON_CODES = 10


class TraceStats(BaseModel):
    """Everything ``supervisor traces analyze`` reports."""

    model_config = ConfigDict(frozen=True)

    since: datetime | None = None
    events: int = 0
    runs: int = 0
    tool_results: int = 0
    usable_rate: float | None = None
    fallback_rate: float | None = None
    degraded_rate: float | None = None
    tools: list[ToolStats] = Field(default_factory=list)
    provider_error_codes: dict[str, int] = Field(default_factory=dict)
    top_reason_codes: list[tuple[str, int]] = Field(default_factory=list)
    proposals: int = 0
    proposals_by_status: dict[str, int] = Field(default_factory=dict)
    approval_latency_p50_s: float | None = None
    approval_latency_p95_s: float | None = None
    decided: int = 0
    expired: int = 0
    rejected: int = 0

    def to_json(self) -> dict[str, Any]:
        """JSON data (datetimes as ISO-8601)."""
        data: dict[str, Any] = self.model_dump(mode="json")
        return data

    @field_serializer("tools")
    def _tool_figures(self, tools: list[ToolStats]) -> list[dict[str, Any]]:
        return [tool.report() for tool in tools]


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """``--since``: an ISO-8601 time (UTC if no offset) or a relative ``30m``/``2h``/``7d``.

    Raises:
        ValueError: neither form, or a duration reaching back before year 1.
    """
    moment = now or datetime.now(UTC)
    relative = _RELATIVE.match(text.strip().lower())
    if relative:
        amount, unit = float(relative.group(1)), relative.group(2)
        try:
            return moment - timedelta(**{_UNITS[unit]: amount})
        except OverflowError:  # also an amount that overflows a float (inf)
            raise ValueError(f"{text!r} reaches back before the year 1") from None
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is neither an ISO-8601 time nor a duration like 30m, 2h or 7d"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of ``values`` (``None`` when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def iter_events(ledger: ApprovalLedger, *, batch: int = 2_000) -> Iterator[TraceEvent]:
    """Every trace event in id order, read in batches."""
    after = 0
    while True:
        events = ledger.trace_events(after_id=after, limit=batch)
        if not events:
            return
        yield from events
        after = events[-1].event_id or after
        if len(events) < batch:
            return


def iter_proposals(ledger: ApprovalLedger) -> Iterator[Proposal]:
    """Every proposal, oldest first, all pages."""
    cursor: str | None = None
    while True:
        page = ledger.list(limit=1000, cursor=cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _is_degraded(event: TraceEvent) -> bool:
    if event.outcome_status == "degraded":
        return True
    outcome = event.payload.get("outcome")
    return isinstance(outcome, dict) and outcome.get("degraded") is True


def analyze_events(
    events: Iterable[TraceEvent], proposals: Iterable[Proposal], since: datetime | None = None
) -> TraceStats:
    """Compute :class:`TraceStats` from events and proposals (filtered by ``since``)."""
    total = 0
    runs: set[str] = set()
    by_tool: dict[str, ToolStats] = {}
    provider_codes: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for event in events:
        if since is not None and event.at < since:
            continue
        total += 1
        if event.run_id:
            runs.add(event.run_id)
        if event.kind == "model_call" and event.outcome_status == "provider_error":
            provider_codes[event.reason_code or "unknown"] += 1
        if event.kind != "tool_result":
            continue
        tool = event.tool or "(unknown)"
        status = event.outcome_status or "unknown"
        stats = by_tool.get(tool)
        if stats is None:
            stats = by_tool[tool] = ToolStats(tool)
        stats.add_result(status, degraded=_is_degraded(event))
        if status == "provider_error":
            provider_codes[event.reason_code or "unknown"] += 1
        if event.reason_code:
            reasons[event.reason_code] += 1
    tools = [by_tool[tool] for tool in sorted(by_tool)]
    results_total = sum(tool.results for tool in tools)
    latencies: list[float] = []
    by_status: Counter[str] = Counter()
    for proposal in proposals:
        if since is not None and proposal.created_at < since:
            continue
        by_status[proposal.status.value] += 1
        if proposal.decided_at is not None and proposal.status is not ProposalStatus.EXPIRED:
            latencies.append((proposal.decided_at - proposal.created_at).total_seconds())
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    return TraceStats(
        since=since,
        events=total,
        runs=len(runs),
        tool_results=results_total,
        usable_rate=rate(sum(tool.usable for tool in tools), results_total),
        fallback_rate=rate(sum(tool.outcomes["fallback"] for tool in tools), results_total),
        degraded_rate=rate(sum(tool.degraded for tool in tools), results_total),
        tools=tools,
        provider_error_codes=dict(provider_codes.most_common()),
        top_reason_codes=reasons.most_common(TOP_REASON_CODES),
        proposals=sum(by_status.values()),
        proposals_by_status=dict(sorted(by_status.items())),
        approval_latency_p50_s=None if p50 is None else round(p50, 3),
        approval_latency_p95_s=None if p95 is None else round(p95, 3),
        decided=len(latencies),
        expired=by_status.get("expired", 0),
        rejected=by_status.get("rejected", 0),
    )


def analyze(ledger: ApprovalLedger, *, since: datetime | None = None) -> TraceStats:
    """Analyze a ledger's trace events and proposals.

    Args:
        ledger: The ledger to read (read-only).
        since: Only events and proposals at or after this time.

    Returns:
        The figures as :class:`TraceStats`.
    """
    return analyze_events(iter_events(ledger), iter_proposals(ledger), since)


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def format_stats(stats: TraceStats) -> str:
    """A plain-text report of ``stats`` for the terminal (names from the ledger escaped)."""
    from supervisor.services.rendering import visible_escapes as shown

    lines = [
        f"events {stats.events}  runs {stats.runs}  tool results {stats.tool_results}"
        + (f"  since {stats.since.isoformat()}" if stats.since else ""),
        f"usable {_pct(stats.usable_rate)}  fallback {_pct(stats.fallback_rate)}  "
        f"degraded {_pct(stats.degraded_rate)}",
        "",
        f"{'tool':<40} {'results':>7} {'usable':>7} {'fallbk':>7} {'degr':>7}  statuses",
    ]
    for tool in stats.tools:
        counts = " ".join(f"{shown(status)}={count}" for status, count in tool.by_status.items())
        lines.append(
            f"{shown(tool.tool)[:40]:<40} {tool.results:>7} {_pct(tool.usable_rate):>7} "
            f"{_pct(tool.fallback_rate):>7} {_pct(tool.degraded_rate):>7}  {counts}"
        )
    lines += [
        "",
        f"proposals {stats.proposals}  decided {stats.decided}  rejected {stats.rejected}  "
        f"expired {stats.expired}",
        f"approval latency p50 {_seconds(stats.approval_latency_p50_s)}  "
        f"p95 {_seconds(stats.approval_latency_p95_s)}",
    ]
    if stats.provider_error_codes:
        codes = ", ".join(f"{shown(code)}={n}" for code, n in stats.provider_error_codes.items())
        lines.append(f"provider errors: {codes}")
    if stats.top_reason_codes:
        top = ", ".join(f"{shown(code)}={n}" for code, n in stats.top_reason_codes)
        lines.append(f"top reason codes: {top}")
    return "\n".join(lines)
