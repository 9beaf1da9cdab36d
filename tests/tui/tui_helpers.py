"""Helpers shared by the UI tests: seeding a ledger, recording notifications, reading what
a widget draws."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from textual.geometry import Region
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widget import Widget

from screens.app import SupervisorApp
from screens.main_screen import MainScreen
from supervisor.ledger.models import Proposal, TraceEvent
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.rendering import visible_escapes

SCHEMA_HASH = "5" * 64
FIXED_NOW = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
STATUSES = ("success", "success", "empty", "fallback", "error")


def propose(ledger: ApprovalLedger, tool: str = "create_customer", **overrides: Any) -> Proposal:
    """A pending proposal with sensible defaults."""
    arguments = overrides.pop("arguments", {"name": "Ada Lovelace", "tier": "gold"})
    options: dict[str, Any] = {
        "owner": "crm-agent",
        "thread_id": "t-1",
        "domains": ["crm"],
        "policy_reason": "creates a customer record",
        "ttl_seconds": 3600,
    }
    options.update(overrides)
    return ledger.propose(tool, SCHEMA_HASH, arguments, **options)


def record_notifications(app: SupervisorApp) -> list[str]:
    """Every notification text the app shows from now on."""
    notes: list[str] = []
    original = app.notify

    def recording(message: str, **kwargs: Any) -> None:
        notes.append(message)
        original(message, **kwargs)

    app.notify = recording  # type: ignore[method-assign]
    return notes


async def wait_for(pilot: Pilot[None], predicate: Callable[[], bool], limit: float = 5.0) -> None:
    """Let the app run until ``predicate`` holds (fails the test after ``limit`` seconds)."""
    deadline = asyncio.get_running_loop().time() + limit
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.02)


def generate_trace(count: int) -> list[TraceEvent]:
    """A deterministic mix of agents, tools and outcomes."""
    return [
        TraceEvent(
            at=FIXED_NOW + timedelta(seconds=index),
            agent_id=f"agent-{index % 3}",
            thread_id=f"t{index % 2}",
            run_id="run-1",
            kind="tool_result",
            tool=("inventory_lookup", "create_customer", "search_docs")[index % 3],
            outcome_status=STATUSES[index % len(STATUSES)],
            reason_code="ok" if index % 5 != 4 else "timeout",
            payload={"n": index},
        )
        for index in range(count)
    ]


#: Text a hostile agent, tool, web page or process can put in the ledger: markup that would
#: crash (``[/]``), restyle, link or bind an action, terminal escapes (clear screen, set the
#: title) and a bidi override.
HOSTILE = (
    "[/]",
    "[bold]x[/bold]",
    "[link=https://evil]click[/link]",
    "[@click=app.quit]x[/]",
    "\x1b[2J\x1b]0;pwned\x07",
    "pay\u202egnp.exe",
)


def main_screen(app: object) -> MainScreen:
    """The app's current screen, which must be the main screen."""
    screen = getattr(app, "screen", None)
    assert isinstance(screen, MainScreen)
    return screen


def toast_text(app: object) -> str:
    """What every toast on the app's current screen draws, one toast after another."""
    screen = getattr(app, "screen")  # noqa: B009 - the screen the toasts are on
    return "\n".join(drawn_text(toast) for toast in screen.query("Toast"))


def drawn(widget: Widget, height: int | None = None) -> list[Strip]:
    """The lines ``widget`` draws now, border included (``height`` rows; default all)."""
    size = widget.outer_size
    return widget.render_lines(Region(0, 0, size.width, size.height if height is None else height))


def drawn_text(widget: Widget, height: int | None = None) -> str:
    """The plain text ``widget`` draws now, one line per row."""
    return "\n".join(strip.text for strip in drawn(widget, height))


def assert_drawn_literally(
    widget: Widget, values: Iterable[str], height: int | None = None
) -> None:
    """Each of ``values`` appears in what ``widget`` draws exactly as text, escaped like the
    arguments view, and nothing it draws is a hyperlink, a click action or a raw control."""
    strips = drawn(widget, height)
    text = "\n".join(strip.text for strip in strips)
    for value in values:
        assert visible_escapes(value) in text, (value, text)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, text
    for strip in strips:
        for segment in strip:
            style = segment.style
            if style is None:
                continue
            assert not style.link, (segment, text)
            assert not any(str(key).startswith("@") for key in style.meta), (segment, text)


async def expect_drawn(
    pilot: Pilot[None], widget: Widget, values: Iterable[str], limit: float = 5.0
) -> None:
    """Let the app run until ``widget`` draws every one of ``values`` (escaped), then
    :func:`assert_drawn_literally` (a repaint can lag behind the state it shows)."""
    expected = [visible_escapes(value) for value in values]
    with contextlib.suppress(AssertionError):
        await wait_for(pilot, lambda: all(item in drawn_text(widget) for item in expected), limit)
    assert_drawn_literally(widget, values)
