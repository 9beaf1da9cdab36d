"""``/tui``: the whole supervisor TUI in the browser, through textual-serve.

textual-serve's aiohttp application is mounted under ``/tui/`` on the same server, so the same
login, Host check and headers guard it. Each browser connection runs ``supervisor --db URL`` as
its own process driven by textual-serve's web driver; decisions taken there are the TUI's
(``via="tui"``, as the OS user the server runs as), not the operator's.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

from aiohttp import web

from supervisor.assets import asset_path

TUI_PREFIX = "/tui"


def tui_command(db_url: str | None) -> str:
    """The shell command textual-serve runs per connection: this Python, this ledger."""
    parts = [sys.executable, "-c", "from supervisor.cli.main import main; main()"]
    if db_url:
        parts += ["--db", db_url]
    return shlex.join(parts)


async def tui_app(db_url: str | None, public_url: str | None) -> web.Application:
    """textual-serve's application for the TUI, with a page that loads nothing external.

    Args:
        db_url: The ledger the TUI opens.
        public_url: The URL browsers reach the server by behind a proxy; ``None`` uses the
            (checked) Host of each request.
    """
    fixed_url = public_url.rstrip("/") if public_url else None
    from textual_serve.server import Server

    class _QuietServer(Server):
        async def on_startup(self, app: web.Application) -> None:
            """textual-serve prints a banner here; ``supervisor serve`` prints its own."""

        async def handle_index(self, request: web.Request) -> Any:
            """The page, with its WebSocket on the host the browser used (already checked
            against the allowed hosts), so the session cookie goes with it."""
            if not fixed_url:
                self.public_url = f"http://{request.host}"
            return await super().handle_index(request)

    server = _QuietServer(
        tui_command(db_url),
        title="Agent Supervisor",
        public_url=fixed_url or "http://127.0.0.1",
        templates_path=asset_path("web", "tui"),
    )
    app: Any = await server._make_app()
    assert isinstance(app, web.Application)
    return app
