"""Opening the Textual app; the only CLI module that imports Textual (inside functions)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

import click

if TYPE_CHECKING:
    from supervisor.rules.replay import ReplayReport


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """No garbage collection while the app is imported and built, then the objects made so far
    frozen (never scanned again).

    Start-up creates a few hundred thousand objects that live as long as the process (modules,
    classes, SQLAlchemy tables, pydantic validators) and almost no garbage, yet the collector
    would stop to scan them all several times: about a sixth of the import time. Frozen, they
    also stay out of every later full collection while the app runs.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


class _RunnableApp(Protocol):
    """What this module needs of the app: run it, then read how it ended."""

    @property
    def return_code(self) -> int | None: ...

    def run(self) -> object: ...


def run_app(app: _RunnableApp) -> None:
    """Run ``app`` in this terminal; exit non-zero when it died of an exception.

    Textual catches an unhandled exception, prints its traceback once the terminal is restored
    and sets ``return_code`` to 1, but ``run()`` returns normally: without this check a crash
    would end the command with exit 0, as if the operator had quit.

    Raises:
        SystemExit: With the app's non-zero return code, after one line on stderr.
    """
    app.run()
    code = app.return_code
    if code:
        click.echo(
            "error [tui_crashed]: the supervisor stopped on an unexpected error (shown above). "
            "This is a bug: please report it with the traceback.",
            err=True,
        )
        raise SystemExit(code)


def preload_tui() -> None:
    """Import the app ahead of :func:`open_tui`, for a caller that starts CPU-hungry work
    (``supervisor demo``'s agents) in between: the imports then do not compete with it."""
    with collection_paused():
        import screens.app  # noqa: F401 - imported for its side effect: loaded modules


def open_tui(
    db_url: str | None = None,
    *,
    notify: str | None = None,
    after_first_frame: Callable[[], None] | None = None,
) -> None:
    """Run the supervisor on the ledger at ``db_url`` (default ledger when ``None``).

    Args:
        db_url: Ledger URL or SQLite path.
        notify: Notification channels (``bell,osc,desktop`` or ``none``); ``None`` reads
            ``SUPERVISOR_NOTIFY``, else all.
        after_first_frame: Called on the app's thread once the first frame is on screen (the
            demo starts its agents then); it must return quickly.
    """
    import os

    with collection_paused():
        from screens.app import make_app
        from supervisor.cli.proposals import ledger_url
        from supervisor.services.notify import parse_channels
        from supervisor.services.settings import SupervisorSettings

        channels = parse_channels(
            notify if notify is not None else os.environ.get("SUPERVISOR_NOTIFY")
        )
        app = make_app(SupervisorSettings(db_url=ledger_url(db_url), notify=channels))
        app.after_first_frame = after_first_frame
    run_app(app)


def open_replay(report: ReplayReport, source: str) -> None:
    """Show a policy replay report on screen (``supervisor policy replay FILE --tui``)."""
    from screens.app import make_replay_app

    run_app(make_replay_app(report, source))


def open_review(source: str) -> None:
    """Run the offline review of ``source`` (ledger path/URL or JSONL trace)."""
    from screens.app import make_app

    run_app(make_app(review_source=source))
