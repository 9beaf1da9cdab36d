"""Opening the Textual app; the only CLI module that imports Textual (inside functions)."""

from __future__ import annotations


def open_tui(db_url: str | None = None) -> None:
    """Run the supervisor on the ledger at ``db_url`` (default ledger when ``None``)."""
    from screens.app import make_app
    from supervisor.cli.proposals import ledger_url
    from supervisor.services.settings import SupervisorSettings

    make_app(SupervisorSettings(db_url=ledger_url(db_url))).run()


def open_review(source: str) -> None:
    """Run the offline review of ``source`` (ledger path/URL or JSONL trace)."""
    from screens.app import make_app

    make_app(review_source=source).run()
