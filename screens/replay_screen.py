"""``supervisor policy replay FILE --tui``: what a candidate policy would have done, on screen.

The report is computed before the screen opens (:func:`supervisor.rules.replay.replay`). The
screen shows, first and in red, every call a human rejected (or reconciled as failed) that the
candidate would allow, then the calls a human edited that it would allow unedited and the
approved calls it would deny; beside them the counts and a plot of the verdict mix over time
(one stacked bar per hour or day: allow, ask, deny). Every ledger text (ids, tools, agents,
arguments, reasons) is shown literally.
"""

from __future__ import annotations

import json
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from screens.literal import escaped
from supervisor.rules.replay import Bucket, Flagged, ReplayReport

PLOT_WIDTH = 40
_MARKS = (("allow", "█", "green"), ("ask", "▒", "yellow"), ("deny", "░", "red"))
_HUMAN = {"rejected": "rejected", "reconciled_failed": "reconciled as failed",
          "edited": "edited before approving", "approved": "approved"}  # fmt: skip


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def flagged_text(flag: Flagged) -> Text:
    """Three lines about one flagged call, every ledger value literal."""
    rule = f"rule {escaped(flag.rule)}" if flag.rule else "the tool's default"
    said = f": {escaped(flag.reason)}" if flag.reason else " (no reason given)"
    arguments = _clip(json.dumps(flag.arguments, ensure_ascii=False, sort_keys=True), 160)
    text = Text()
    text.append(f"{escaped(flag.proposal_id)}  {escaped(flag.tool)}  agent "
                f"{escaped(flag.agent)}\n", style="bold")  # fmt: skip
    text.append(f"  {flag.verdict} by {rule}; {_HUMAN[flag.flag]} by "
                f"{escaped(flag.by or '?')}{said}\n")  # fmt: skip
    text.append(f"  arguments {escaped(arguments)}\n")
    return text


def plot_text(timeline: list[Bucket], unit: str, width: int = PLOT_WIDTH) -> Text:
    """One stacked bar per bucket, scaled to the busiest, with its three counts."""
    text = Text()
    text.append(f"verdict mix per {unit}  ")
    for name, mark, style in _MARKS:
        text.append(f"{mark} {name}  ", style=style)
    text.append("\n")
    busiest = max((b.allow + b.ask + b.deny for b in timeline), default=0)
    stamp = "%m-%d %H:00" if unit == "hour" else "%Y-%m-%d"
    for bucket in timeline:
        counts = {"allow": bucket.allow, "ask": bucket.ask, "deny": bucket.deny}
        text.append(f"{bucket.start.strftime(stamp):<11} ")
        used = 0
        for name, mark, style in _MARKS:
            cells = round(width * counts[name] / busiest) if busiest else 0
            cells = min(cells, width - used)
            used += cells
            text.append(mark * cells, style=style)
        text.append(" " * (width - used))
        text.append(f" {bucket.allow:>5} {bucket.ask:>5} {bucket.deny:>5}\n")
    return text


def summary_text(report: ReplayReport, source: str) -> Text:
    verdicts, human = report.verdicts, report.human
    text = Text()
    text.append(f"Replay of {escaped(source)}\n", style="bold")
    text.append(f"{report.replayed} decided calls; candidate: {verdicts['allow']} allow, "
                f"{verdicts['ask']} ask, {verdicts['deny']} deny\n")  # fmt: skip
    undecided, by_rule = human["undecided"], human["by_rule"]
    text.append(f"humans: {human['approved']} approved, {human['rejected']} rejected, "
                f"{undecided} expired or cancelled, {by_rule} by rules\n")  # fmt: skip
    text.append(f"prompts saved: {report.prompts_saved} of {report.prompts} "
                f"({report.saved_share:.0%})\n")  # fmt: skip
    if report.safe:
        text.append("OK: no call a human rejected would be allowed.\n", style="green")
    else:
        text.append(f"FAIL: {len(report.rejected_allowed)} call(s) a human REJECTED would be "
                    "ALLOWED\n", style="bold red")  # fmt: skip
    return text


class ReplayScreen(Screen[None]):
    """The replay report of one candidate policy (read-only; ``q`` closes it)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "app.quit", "Quit", id="quit")]
    DEFAULT_CSS = """
    ReplayScreen #replay-flags { width: 1fr; border: round $error; }
    ReplayScreen #replay-side { width: 74; border: round $primary; }
    """

    def __init__(self, report: ReplayReport, source: str) -> None:
        super().__init__()
        self.report = report
        self.source = source

    def compose(self) -> ComposeResult:
        report = self.report
        with Horizontal():
            with VerticalScroll(id="replay-flags"):
                yield Static(self._flags(), id="replay-flag-list", markup=False)
            with VerticalScroll(id="replay-side"):
                yield Static(summary_text(report, self.source), id="replay-summary",
                             markup=False)  # fmt: skip
                yield Static(plot_text(report.timeline, report.unit), id="replay-plot",
                             markup=False)  # fmt: skip
        yield Footer()

    def _flags(self) -> Text:
        report = self.report
        text = Text()
        sections = (
            ("REJECTED by a human, ALLOWED by the candidate", report.rejected_allowed, "red"),
            ("edited by a human, allowed unedited", report.edited_allowed, "yellow"),
            ("approved by a human, denied by the candidate", report.approved_denied, "blue"),
        )
        for title, flags, style in sections:
            text.append(f"{title}: {len(flags)}\n", style=f"bold {style}")
            for flag in flags:
                text.append_text(flagged_text(flag))
            text.append("\n")
        return text
