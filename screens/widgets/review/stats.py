"""Per-tool statistics and the outcome mix of a reviewed trace, as text."""

from __future__ import annotations

from collections import Counter

from supervisor.services.review import ReviewIndex

BAR_WIDTH = 20


def _bar(part: int, total: int) -> str:
    filled = round(BAR_WIDTH * part / total) if total else 0
    return "█" * filled + "·" * (BAR_WIDTH - filled)


def outcome_mix(outcomes: Counter[str]) -> list[str]:
    """One bar per outcome status, largest first."""
    total = sum(outcomes.values())
    return [
        f"{status:<20} {_bar(count, total)} {count:>7} ({count / total:5.1%})"
        for status, count in outcomes.most_common()
    ]


def stats_text(index: ReviewIndex) -> str:
    """Outcome mix and a per-tool table (calls, results, usable share, top outcomes)."""
    lines = ["outcome mix", *(outcome_mix(index.outcomes) or ["(no outcomes)"]), ""]
    lines.append(f"{'tool':<24} {'calls':>7} {'results':>8} {'usable':>7}  outcomes")
    for stats in sorted(index.tools.values(), key=lambda item: -sum(item.outcomes.values())):
        results = sum(stats.outcomes.values())
        top = ", ".join(f"{name} {count}" for name, count in stats.outcomes.most_common(3))
        lines.append(
            f"{stats.tool:<24.24} {stats.calls:>7} {results:>8} {stats.usable_ratio:>7.0%}  {top}"
        )
    return "\n".join(lines)
