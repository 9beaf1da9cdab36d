"""The aiohttp application of ``supervisor serve``: login, pending list, decision pages.

One composition root, :func:`make_web_app`, used by the command and by tests. Ledger work runs
in threads (``asyncio.to_thread``) so the TUI's WebSockets on the same loop never wait on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from aiohttp import web

from supervisor.assets import asset_path
from supervisor.errors import SupervisorError
from supervisor.ledger.errors import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ProposalNotFound,
)
from supervisor.ledger.operator_tokens import InvalidOperatorToken
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.guard import RenderGuardMissing
from supervisor.web import pages
from supervisor.web.desk import DecisionDesk
from supervisor.web.errors import (
    CsrfFailed,
    HostRefused,
    LinkIncomplete,
    LoginRequired,
    OriginRefused,
    WebRefused,
)
from supervisor.web.security import PAGE_CSP, SECURITY_HEADERS, TUI_CSP, Origins
from supervisor.web.sessions import SESSION_COOKIE, Session, SessionStore
from supervisor.web.tui import TUI_PREFIX, tui_app

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_STATUS: dict[type[SupervisorError], int] = {
    ProposalNotFound: 404,
    ApprovalAlreadyDecided: 409,
    ApprovalExpired: 410,
    RenderGuardMissing: 409,
    InvalidOperatorToken: 401,
}
_STATIC = {"serve.css", "tui.css"}


@dataclass(frozen=True)
class WebSettings:
    """How one ``supervisor serve`` runs.

    Attributes:
        host, port: Where it listens.
        public_url: The ``https://`` URL a TLS reverse proxy serves it at (``None``: loopback).
        secure_cookies: Mark the session cookie ``Secure`` (default: when public_url is https).
        session_seconds: How long a login lasts.
        settle_seconds: Least time between showing a decision page and deciding from it.
        db_url: The ledger the TUI at ``/tui`` opens (``None``: the default ledger).
        tui: Serve the TUI at ``/tui``.
    """

    host: str = "127.0.0.1"
    port: int = 8470
    public_url: str | None = None
    secure_cookies: bool | None = None
    session_seconds: float = 12 * 3600.0
    settle_seconds: float = 0.5
    db_url: str | None = None
    tui: bool = True

    @property
    def cookie_secure(self) -> bool:
        if self.secure_cookies is not None:
            return self.secure_cookies
        return bool(self.public_url and self.public_url.lower().startswith("https://"))


def _status(error: SupervisorError) -> int:
    if isinstance(error, WebRefused):
        return error.status
    for kind, status in _STATUS.items():
        if isinstance(error, kind):
            return status
    return 403 if isinstance(error, PermissionError) else 400


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


class WebApp:
    """The request handlers over one ledger.

    Args:
        ledger: The shared ledger.
        settings: How the server runs.
    """

    def __init__(self, ledger: ApprovalLedger, settings: WebSettings) -> None:
        self.ledger = ledger
        self.settings = settings
        self.sessions = SessionStore(settings.session_seconds)
        self.desk = DecisionDesk(ledger, settings.settle_seconds)
        self.origins = Origins.for_server(settings.host, settings.port, settings.public_url)

    # -- middleware -------------------------------------------------------------------------

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Host check, typed refusals as pages, security headers on every response."""
        try:
            if not self.origins.host_ok(request.host):
                raise HostRefused(request.host)
            if request.path == TUI_PREFIX or request.path.startswith(TUI_PREFIX + "/"):
                await self._tui_gate(request)
            response = await handler(request)
        except SupervisorError as error:
            back = await self._back_link(request) if isinstance(error, WebRefused) else None
            response = _html(
                pages.refused_page(error.code, error.message, error.hint, back), _status(error)
            )
        except web.HTTPException as http_error:
            response = http_error
        tui = request.path.startswith(TUI_PREFIX)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        response.headers["Content-Security-Policy"] = TUI_CSP if tui else PAGE_CSP
        return response

    @staticmethod
    async def _back_link(request: web.Request) -> str | None:
        """For a refused decision: its page again (a fresh view, a fresh settle time)."""
        proposal_id = request.match_info.get("proposal_id")
        if request.method != "POST" or not proposal_id:
            return None
        args_hash = (await request.post()).get("args_hash")
        if not isinstance(args_hash, str) or not args_hash:
            return None
        return f"/p/{quote(proposal_id, safe='')}?h={quote(args_hash, safe='')}"

    async def _tui_gate(self, request: web.Request) -> None:
        session = await self._session(request)
        if session is None:
            raise web.HTTPSeeOther("/login")
        if request.headers.get("Upgrade", "").lower() == "websocket":
            self._check_origin(request)

    # -- sessions ---------------------------------------------------------------------------

    async def _session(self, request: web.Request) -> Session | None:
        session = self.sessions.get(request.cookies.get(SESSION_COOKIE))
        if session is None:
            return None
        operator = await asyncio.to_thread(self.ledger.operator, session.operator)
        if operator is None or not operator.active:
            self.sessions.close_operator(session.operator)
            return None
        return session

    async def _page_session(self, request: web.Request) -> Session:
        session = await self._session(request)
        if session is None:
            raise web.HTTPSeeOther("/login")
        return session

    async def _post_session(self, request: web.Request) -> tuple[Session, Any]:
        """The session of a state-changing request, after the Origin and CSRF checks."""
        self._check_origin(request)
        session = await self._session(request)
        if session is None:
            raise LoginRequired()
        form = await request.post()
        given = form.get("csrf")
        if not isinstance(given, str) or not given:
            raise CsrfFailed(missing=True)
        if not session.csrf_matches(given):
            raise CsrfFailed(missing=False)
        return session, form

    def _check_origin(self, request: web.Request) -> None:
        origin = request.headers.get("Origin")
        if not self.origins.origin_ok(origin, request.headers.get("Referer")):
            raise OriginRefused(origin)

    # -- handlers ---------------------------------------------------------------------------

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        return _html(pages.login_page())

    async def login(self, request: web.Request) -> web.StreamResponse:
        self._check_origin(request)
        form = await request.post()
        token = form.get("token")
        try:
            if not isinstance(token, str) or not token.strip():
                raise InvalidOperatorToken()
            operator = await asyncio.to_thread(self.ledger.authenticate, token.strip())
        except InvalidOperatorToken as error:
            return _html(pages.login_page(f"error [{error.code}]: {error.message}"), 401)
        session = self.sessions.open(operator.name)
        response = web.HTTPSeeOther("/")
        response.set_cookie(
            SESSION_COOKIE, session.session_id, httponly=True, samesite="Strict",
            secure=self.settings.cookie_secure, path="/",
            max_age=int(self.settings.session_seconds),
        )  # fmt: skip
        return response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        session, _ = await self._post_session(request)
        self.sessions.close(session.session_id)
        response = web.HTTPSeeOther("/login")
        response.del_cookie(SESSION_COOKIE, path="/")
        return response

    async def index(self, request: web.Request) -> web.StreamResponse:
        session = await self._page_session(request)
        pending = await asyncio.to_thread(self.desk.pending)
        return _html(pages.list_page(pending, session.operator, session.csrf_token))

    async def proposal(self, request: web.Request) -> web.StreamResponse:
        session = await self._page_session(request)
        link_hash = request.query.get("h", "")
        if not link_hash:
            raise LinkIncomplete()
        proposal_id = request.match_info["proposal_id"]
        page = await asyncio.to_thread(self.desk.show, session, proposal_id, link_hash)
        now = self.ledger.clock.now()
        return _html(pages.decision_page(page, session.operator, session.csrf_token, now))

    async def decide(self, request: web.Request) -> web.StreamResponse:
        session, form = await self._post_session(request)
        action: Literal["approve", "reject"]
        match form.get("action"):
            case "approve":
                action = "approve"
            case "reject":
                action = "reject"
            case _:
                raise web.HTTPBadRequest(text="action is approve or reject")
        decided = await asyncio.to_thread(
            self.desk.decide, session, request.match_info["proposal_id"],
            view_id=str(form.get("view") or ""), args_hash=str(form.get("args_hash") or ""),
            action=action, reason=str(form.get("reason") or ""),
        )  # fmt: skip
        return _html(pages.decided_page(decided, session.operator, session.csrf_token))

    async def static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in _STATIC:
            raise web.HTTPNotFound()
        return web.FileResponse(asset_path("web", name), headers={"Cache-Control": "no-cache"})


async def make_web_app(ledger: ApprovalLedger, settings: WebSettings) -> web.Application:
    """The whole server: pages, decisions, static files and (optionally) the TUI at /tui."""
    handlers = WebApp(ledger, settings)
    app = web.Application(middlewares=[handlers.guard], client_max_size=64 * 1024)
    app.add_routes([
        web.get("/login", handlers.login_form),
        web.post("/login", handlers.login),
        web.post("/logout", handlers.logout),
        web.get("/", handlers.index),
        web.get("/p/{proposal_id}", handlers.proposal),
        web.post("/p/{proposal_id}/decide", handlers.decide),
        web.get("/static/{name}", handlers.static),
    ])  # fmt: skip
    if settings.tui:

        async def tui_slash(request: web.Request) -> web.StreamResponse:
            raise web.HTTPPermanentRedirect(TUI_PREFIX + "/")

        app.router.add_get(TUI_PREFIX, tui_slash)
        app.add_subapp(TUI_PREFIX + "/", await tui_app(settings.db_url, settings.public_url))
    return app
