"""The live trace opens on its newest events, follows the tail, and filters by agent.

Events are written to a real SQLite ledger before and while the app runs; the traces service
follows them as in production.
"""

from __future__ import annotations

from datetime import timedelta

from tui_helpers import FIXED_NOW, drawn_text, generate_trace, main_screen, wait_for

from screens.app import make_app
from screens.widgets.processes.processes_pane import ProcessesPane
from screens.widgets.trace.trace_view import TraceView
from supervisor.ledger.models import TraceEvent
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.store.provider import SQLModelProvider

SIZE = (150, 45)


def later(count: int, start: int) -> list[TraceEvent]:
    """``count`` events stamped after every event of ``generate_trace(start)``."""
    return [
        event.model_copy(update={"at": FIXED_NOW + timedelta(seconds=start + index)})
        for index, event in enumerate(generate_trace(count))
    ]


def stamp(index: int) -> str:
    return f"{FIXED_NOW + timedelta(seconds=index):%H:%M:%S}"


async def test_the_trace_opens_on_the_tail_follows_it_and_stops_when_the_reader_moves(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    provider.ledger.append_trace(generate_trace(300))
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        trace = screen.query_one(TraceView)
        await wait_for(pilot, lambda: len(trace.events) == 300)
        await wait_for(pilot, lambda: stamp(299) in drawn_text(trace))
        assert trace.max_scroll_y > 0 and trace.scroll_offset.y == trace.max_scroll_y
        assert stamp(0) not in drawn_text(trace)

        provider.ledger.append_trace(later(50, 300))
        await wait_for(pilot, lambda: stamp(349) in drawn_text(trace))
        assert trace.following and trace.scroll_offset.y == trace.max_scroll_y

        # The reader moves up: new events arrive but the view stays where it is.
        await pilot.press("t", "up", "up")
        assert trace.cursor == 348 and not trace.following
        offset = trace.scroll_offset.y
        provider.ledger.append_trace(later(50, 350))
        await wait_for(pilot, lambda: len(trace.events) == 400)
        await pilot.pause(0.1)
        assert trace.scroll_offset.y == offset
        assert stamp(399) not in drawn_text(trace) and stamp(348) in drawn_text(trace)

        await pilot.press("end")
        await wait_for(pilot, lambda: stamp(399) in drawn_text(trace))
        assert trace.following


async def test_the_trace_keeps_its_tail_in_sight_when_its_pane_shrinks(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    """A smaller terminal (or a pane above growing) moves the end down: a follower goes too."""
    provider.ledger.append_trace(generate_trace(300))
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        trace = main_screen(app).query_one(TraceView)
        await wait_for(pilot, lambda: stamp(299) in drawn_text(trace))
        height = trace.size.height
        await pilot.resize_terminal(SIZE[0], SIZE[1] - 12)
        await wait_for(pilot, lambda: trace.size.height < height)
        await wait_for(pilot, lambda: stamp(299) in drawn_text(trace))
        assert trace.following and trace.scroll_offset.y == trace.max_scroll_y


async def test_selecting_an_agent_filters_the_trace_and_f_clears_the_filter(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    provider.ledger.append_trace(generate_trace(90))
    app = make_app(settings, ledger=provider.ledger, identity=identity)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        trace = screen.query_one(TraceView)
        pane = screen.query_one(ProcessesPane)
        title = screen.query_one("#trace-title")
        await wait_for(pilot, lambda: len(trace.events) == 90)
        await wait_for(pilot, lambda: "agent:agent-1" in [row.key for row in pane.process_rows])
        assert "all agents" in drawn_text(title)
        assert not screen.check_action("clear_trace_filter", ())  # nothing to clear yet

        await pilot.press("p")
        while pane.selected_key != "agent:agent-1":
            await pilot.press("down")
        await wait_for(pilot, lambda: len(trace.events) == 30)
        assert {event.agent_id for event in trace.events} == {"agent-1"}
        assert "agent agent-1" in drawn_text(title)
        # New events of other agents stay out; agent-1's come in.
        provider.ledger.append_trace(later(3, 90))
        await wait_for(pilot, lambda: len(trace.all_events) == 93)
        await wait_for(pilot, lambda: len(trace.events) == 31)
        assert {event.agent_id for event in trace.events} == {"agent-1"}

        assert screen.check_action("clear_trace_filter", ())
        await pilot.press("f")
        await wait_for(pilot, lambda: len(trace.events) == 93)
        assert "all agents" in drawn_text(title)
        assert not screen.check_action("clear_trace_filter", ())
