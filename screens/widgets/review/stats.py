"""Side panel text of a reviewed trace: outcome-mix and approval-latency plots, per-tool stats.

Tool names and outcome labels come from the trace, so each is escaped as it is laid out.
"""

from __future__ import annotations

from collections.abc import Iterable

from screens.literal import escaped
from supervisor.services.review.stats import ReviewStats

BAR_WIDTH = 20


def _bar(part: int, total: int) -> str:
    filled = round(BAR_WIDTH * part / total) if total else 0
    return "█" * filled + "·" * (BAR_WIDTH - filled)


def bar_chart(counts: Iterable[tuple[str, int]]) -> list[str]:
    """One text bar per ``(label, count)``, scaled to the total, with count and share."""
    items = list(counts)
    total = sum(count for _, count in items)
    lines = []
    for label, count in items:
        share = count / total if total else 0
        lines.append(f"{escaped(label):<16.16} {_bar(count, total)} {count:>7} ({share:5.1%})")
    return lines


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def latency_plot(stats: ReviewStats) -> list[str]:
    """The approval-latency histogram with p50/p95 (nearest rank)."""
    header = (
        f"approval latency  n={len(stats.latencies)}  "
        f"p50 {_seconds(stats.latency_percentile(50))}  "
        f"p95 {_seconds(stats.latency_percentile(95))}"
    )
    if not stats.latencies:
        return [header, "(no decided approvals)"]
    return [header, *bar_chart(stats.latency_histogram())]


def stats_text(stats: ReviewStats) -> str:
    """Outcome mix, approval figures and a per-tool table of the shown rows."""
    lines = [
        f"outcome mix  ({sum(stats.outcomes.values()):,} tool results)",
        *(bar_chart(stats.outcomes.most_common()) or ["(no outcomes)"]),
        "",
        f"approvals {stats.approvals:,}"
        + "".join(
            f"  {escaped(name)} {count}" for name, count in stats.approval_outcomes.most_common()
        ),
        *latency_plot(stats),
        "",
        f"{'tool':<24} {'calls':>7} {'results':>8} {'usable':>7}  outcomes",
    ]
    for tool in sorted(stats.tools.values(), key=lambda item: (-item.results, item.tool)):
        top = ", ".join(f"{escaped(name)} {count}" for name, count in tool.outcomes.most_common(3))
        name = escaped(tool.tool)
        lines.append(
            f"{name:<24.24} {tool.calls:>7} {tool.results:>8} {tool.usable_ratio:>7.0%}  {top}"
        )
    return "\n".join(lines)
