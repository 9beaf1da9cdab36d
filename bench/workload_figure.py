"""The workload figure (issue 14): how many prompts the suggested policy cuts, and at what cost.

Writes the shipped workload (``tests/data/workload.jsonl``, six days) into a fresh SQLite
ledger through the public ledger API, runs ``policy suggest`` on it and replays the suggestion:

* **in sample**: rules suggested from all six days, replayed over the same six days;
* **held out**: rules suggested from the first four days only, replayed over days five and six
  (calls the suggestion never saw: the honest estimate of what it saves next week).

Prints a table and the verdict mix per day (``#`` allowed by a rule, ``.`` still asked). With
``--demo-home DIR`` it does the same for the ledger the demo left in DIR (run ``supervisor demo
--no-tui --auto-approve --home DIR`` first, a few times for more history).

    .venv/bin/python bench/workload_figure.py [--demo-home DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.workload import read_workload, workload_ledger  # noqa: E402

from supervisor.rules.history import read_history  # noqa: E402
from supervisor.rules.loader import rules_from_document  # noqa: E402
from supervisor.rules.replay import DecidedCall, ReplayReport, decided_calls, replay  # noqa: E402
from supervisor.rules.suggest import Suggestions, suggest  # noqa: E402
from supervisor.store.provider import SQLModelProvider  # noqa: E402


def _history(url: str) -> list[DecidedCall]:
    with SQLModelProvider(url, read_only=True) as provider:
        return decided_calls(read_history(provider.ledger.repository))


def _row(label: str, result: Suggestions, report: ReplayReport) -> str:
    asked = report.prompts - report.prompts_saved
    return (f"| {label} | {len(result.suggestions)} | {report.prompts} | {asked} | "
            f"**{report.saved_share:.0%}** | {len(report.rejected_allowed)} |")  # fmt: skip


def _mix(report: ReplayReport) -> list[str]:
    lines = []
    for bucket in report.timeline:
        total = bucket.allow + bucket.ask + bucket.deny
        bar = "#" * round(40 * bucket.allow / total) if total else ""
        bar += "." * (round(40 * (bucket.allow + bucket.ask) / total) - len(bar)) if total else ""
        lines.append(f"{bucket.start:%a %m-%d}  {bar:<40}  {bucket.allow:3} allow "
                     f"{bucket.ask:3} ask {bucket.deny:3} deny")  # fmt: skip
    return lines


def figure(history: list[DecidedCall], split_days: int | None) -> list[str]:
    lines = ["| suggested from -> replayed over | rules | prompts | still asked | cut | "
             "rejected calls allowed |", "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    result = suggest(history)
    report = result.report
    lines.append(_row("all days -> all days (in sample)", result, report))
    if split_days is not None and history:
        cut = min(c.call.created_at for c in history) + timedelta(days=split_days)
        train = [c for c in history if c.call.created_at < cut]
        held = [c for c in history if c.call.created_at >= cut]
        trained = suggest(train)
        held_report = replay(rules_from_document(trained.document()), held)
        lines.append(_row(f"first {split_days} days -> the rest (held out)", trained, held_report))
        lines += [f"  held out, rejected but allowed: {f.tool} {json.dumps(f.arguments)} by rule "
                  f'"{f.rule}"; {f.by} rejected it: {f.reason}'
                  for f in held_report.rejected_allowed]  # fmt: skip
    return [*lines, "", "verdict mix per day, suggested policy (# allowed, . asked):",
            *_mix(report)]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--demo-home", type=Path, default=None)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="workload-figure-"))
    workload_ledger(folder / "ledger.db")
    _, _, calls = read_workload()
    print(f"shipped workload: {len(calls)} calls, tests/data/workload.jsonl")
    print("\n".join(figure(_history(f"sqlite:///{folder / 'ledger.db'}"), split_days=4)))
    if args.demo_home is not None:
        demo = next(args.demo_home.rglob("*.db"), None)
        if demo is None:
            raise SystemExit(f"no ledger (*.db) under {args.demo_home}")
        history = _history(f"sqlite:///{demo}")
        print(f"\ndemo ledger {demo}: {len(history)} decided calls")
        print("\n".join(figure(history, split_days=None)))


if __name__ == "__main__":
    main()
