"""``supervisor feed-relay``: one listening connection for a host's processes on a PostgreSQL
ledger (:mod:`supervisor.store.relay`)."""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType

import click

from supervisor.cli.output import echo_line
from supervisor.cli.proposals import db_option


@click.command("feed-relay")
@db_option
@click.option("--socket", "socket_path", type=click.Path(path_type=Path), default=None,
              help="Where to listen (default: found from the ledger's URL, or "
              "SUPERVISOR_FEED_RELAY).")  # fmt: skip
def feed_relay(db_url: str | None, socket_path: Path | None) -> None:
    """Hold one LISTEN connection for this host's processes on a PostgreSQL ledger.

    PostgreSQL signals every listening connection at each commit that notifies, so a team
    whose every process listens pays the server once per process for every audited write.
    Processes of this OS user on this host that open the same ledger find the relay by its
    URL and hear the change feed through it; without it they listen themselves. Runs until
    interrupted (Ctrl-C or SIGTERM).
    """
    import sqlalchemy as sa

    from supervisor.store.relay import FeedRelay, RelayNotPostgres, relay_socket_path
    from supervisor.store.urls import resolve_url, shown_url, supported_url

    url = supported_url(resolve_url(db_url))
    if url.get_backend_name() != "postgresql":
        raise RelayNotPostgres()
    engine = sa.create_engine(url.set(drivername="postgresql+psycopg"))
    path = socket_path or relay_socket_path(engine.url)
    if path is None:
        raise click.UsageError("SUPERVISOR_FEED_RELAY=off: pass --socket PATH to run a relay.")
    relay = FeedRelay(engine, path)

    def stop(_signum: int, _frame: FrameType | None) -> None:
        relay.stop()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        relay.serve(on_ready=lambda: echo_line(
            f"Relaying the change feed of {shown_url(url)} on {path}"
        ))  # fmt: skip
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        engine.dispose()
    echo_line(f"Stopped ({relay.forwarded} notifications forwarded).")
