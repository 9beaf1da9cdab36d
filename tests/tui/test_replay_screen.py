"""``supervisor policy replay FILE --tui``: the rejected-but-allowed calls first, then the counts
and a plot of the verdict mix, with every ledger text drawn literally."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from textual.widgets import Static
from tui_helpers import HOSTILE, drawn_text, expect_drawn

from screens.app import make_replay_app
from supervisor.ledger.clock import ManualClock
from supervisor.rules.history import read_history
from supervisor.rules.loader import rules_from_document
from supervisor.rules.replay import decided_calls, replay
from supervisor.store.provider import SQLModelProvider

SIZE = (200, 50)
RULES = {"rules": [{"name": "allow shell", "verdict": "allow", "reason": "r", "tool": "shell"}]}


def _report(tmp_path: Path) -> object:
    clock = ManualClock()
    with SQLModelProvider(f"sqlite:///{tmp_path / 'ledger.db'}", clock=clock) as provider:
        ledger = provider.ledger
        for index, text in enumerate(HOSTILE):  # rejected by a human, with hostile text
            proposal = ledger.propose("shell", "s" * 64, {"command": f"rm {text}"},
                                      owner=f"agent{text}")  # fmt: skip
            ledger.reject(proposal.proposal_id, "operator", f"no{text}")
            clock.advance(3600 * (index % 3))
        for _ in range(4):  # approved
            ledger.approve(ledger.propose("shell", "s" * 64, {"command": "ls"}).proposal_id, "op")
            clock.advance(timedelta(hours=1).total_seconds())
        history = decided_calls(read_history(ledger.repository))
    return replay(rules_from_document(RULES), history)


async def test_the_replay_screen_shows_rejected_calls_first_and_plots_the_mix(
    tmp_path: Path,
) -> None:
    report = _report(tmp_path)
    app = make_replay_app(report, "candidate[/].toml")  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.1)
        flags = app.screen.query_one("#replay-flag-list", Static)
        text = drawn_text(flags, height=200)
        first = text.splitlines()[0]
        assert first.startswith(f"REJECTED by a human, ALLOWED by the candidate: {len(HOSTILE)}")
        await expect_drawn(pilot, flags, [f"agent agent{value}" for value in HOSTILE])
        await expect_drawn(pilot, flags, [f"rejected by operator: no{value}" for value in HOSTILE])
        summary = app.screen.query_one("#replay-summary", Static)
        await expect_drawn(pilot, summary, ["Replay of candidate[/].toml",
                                            f"FAIL: {len(HOSTILE)} call(s)"])  # fmt: skip
        plot = drawn_text(app.screen.query_one("#replay-plot", Static), height=100)
        bars = [line for line in plot.splitlines()[1:] if line.strip()]  # after the legend
        assert bars, plot
        assert sum(int(line.split()[-3]) for line in bars) == len(HOSTILE) + 4  # every allow
