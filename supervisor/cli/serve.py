"""``supervisor serve``: decision pages and the TUI over HTTP, for a browser or a phone.

It listens on loopback by default. Any other address is refused unless ``--public-url
https://...`` says which TLS reverse proxy serves it (or ``--insecure-bind`` is given): the
server itself speaks plain HTTP, and tokens and decisions must not cross a network in clear.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import click

from supervisor.cli.output import echo_line
from supervisor.cli.proposals import db_option, ledger_url
from supervisor.errors import SupervisorError
from supervisor.services.settings import SupervisorSettings


class NotLoopback(SupervisorError, ValueError):
    """``--host`` is reachable from other machines but no TLS proxy was named."""

    code = "serve_not_loopback"

    def __init__(self, host: str) -> None:
        super().__init__(
            f"Refusing to serve on {host}: it is reachable from other machines over plain "
            "HTTP, which would expose operator tokens and decisions.",
            hint="Keep the default 127.0.0.1 and put a TLS reverse proxy in front (see "
            "docs/serve.md), then pass --public-url https://your.host; --insecure-bind "
            "overrides this on a network you trust.",
            host=host,
        )


class PublicUrlInvalid(SupervisorError, ValueError):
    """``--public-url`` is not an ``https://`` URL of a host."""

    code = "invalid_public_url"

    def __init__(self, url: str) -> None:
        super().__init__(
            f"--public-url {url!r} is not an https:// URL with a host.",
            hint="Give the address the TLS reverse proxy serves, e.g. https://supervisor.example.",
        )


def check_bind(host: str, public_url: str | None, insecure_bind: bool) -> None:
    """Refuse a non-loopback ``host`` unless a TLS proxy URL or ``--insecure-bind`` is given.

    Raises:
        PublicUrlInvalid: ``public_url`` is not ``https://host...``.
        NotLoopback: ``host`` is not loopback and neither was given.
    """
    from supervisor.web.security import is_loopback

    if public_url is not None:
        parts = urlsplit(public_url)
        if parts.scheme.lower() != "https" or not parts.hostname:
            raise PublicUrlInvalid(public_url)
    if not is_loopback(host) and public_url is None and not insecure_bind:
        raise NotLoopback(host)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8470, show_default=True, help="Port to listen on.")
@click.option("--public-url", default=None, metavar="https://HOST",
              help="The URL a TLS reverse proxy serves this at (needed for a non-loopback "
              "--host; makes the session cookie Secure).")  # fmt: skip
@click.option(
    "--insecure-bind",
    is_flag=True,
    help="Allow a non-loopback --host without a TLS proxy (trusted networks only).",
)
@click.option("--settle-seconds", type=float, default=None,
              help="Least time between showing a decision page and deciding from it "
              "(default: the TUI's settle time).")  # fmt: skip
@click.option("--session-hours", type=float, default=12.0, show_default=True,
              help="How long a login lasts.")  # fmt: skip
@click.option(
    "--secure-cookie/--no-secure-cookie",
    default=None,
    help="Mark the session cookie Secure (default: when --public-url is https).",
)
@click.option("--no-tui", is_flag=True, help="Do not serve the TUI at /tui.")
@db_option
def serve(
    host: str, port: int, public_url: str | None, insecure_bind: bool,
    settle_seconds: float | None, session_hours: float, secure_cookie: bool | None,
    no_tui: bool, db_url: str | None,
) -> None:  # fmt: skip
    """Serve decision pages (and the TUI at /tui) to named operators.

    Operators log in with the token `supervisor operators add NAME` printed. Each pending
    proposal has a page with its full arguments; decisions are recorded as the operator,
    via web.
    """
    import asyncio

    from aiohttp import web

    from supervisor.store.engine import shown_url
    from supervisor.store.provider import SQLModelProvider
    from supervisor.web.app import WebSettings, make_web_app

    check_bind(host, public_url, insecure_bind)
    settle = SupervisorSettings().decision_settle_seconds
    url = ledger_url(db_url)
    settings = WebSettings(
        host=host, port=port, public_url=public_url, session_seconds=session_hours * 3600,
        settle_seconds=settle if settle_seconds is None else max(0.0, settle_seconds),
        db_url=url, tui=not no_tui, secure_cookies=secure_cookie,
    )  # fmt: skip
    with SQLModelProvider(url, must_exist=False) as provider:
        ledger = provider.ledger
        shown = public_url or f"http://{host}:{port}"
        where = shown_url(provider.engine.url)

        async def started(app: web.Application) -> None:
            echo_line(f"Serving the supervisor on {shown} (ledger {where}).")

        async def build() -> web.Application:
            app = await make_web_app(ledger, settings)
            app.on_startup.append(started)
            return app

        web.run_app(
            build(), host=host, port=port, access_log=None, print=None,
            handle_signals=True, loop=asyncio.new_event_loop(),
        )  # fmt: skip
