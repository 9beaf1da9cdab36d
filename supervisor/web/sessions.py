"""Logged-in operators: sessions held in this server's memory, keyed by an unguessable id.

A session has a per-session anti-forgery token and the decision pages it was shown (each one a
rendered guard with the time it was shown). Sessions end at their expiry, on logout, when the
operator is revoked (checked on every request) and when the server stops.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from supervisor.services.guard import RenderedGuard

SESSION_COOKIE = "supervisor_session"
_MAX_VIEWS = 64
_MAX_SESSIONS = 1_000


@dataclass(frozen=True)
class PageView:
    """One decision page as shown: its proposal, args hash, guard and when it was shown."""

    view_id: str
    proposal_id: str
    args_hash: str
    guard: RenderedGuard
    shown_at: float


@dataclass
class Session:
    """One operator's login."""

    session_id: str
    operator: str
    csrf_token: str
    expires_at: float
    views: OrderedDict[str, PageView] = field(default_factory=OrderedDict)

    def csrf_matches(self, given: str | None) -> bool:
        """Whether ``given`` is this session's anti-forgery token (constant-time)."""
        return given is not None and hmac.compare_digest(given, self.csrf_token)

    def remember(self, view: PageView) -> None:
        """Keep ``view`` (the oldest ones go once there are too many)."""
        self.views[view.view_id] = view
        while len(self.views) > _MAX_VIEWS:
            self.views.popitem(last=False)


class SessionStore:
    """Sessions of this server process.

    Args:
        lifetime_seconds: How long a login lasts.
        clock: Monotonic seconds (tests may fix it).
    """

    def __init__(
        self, lifetime_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.lifetime_seconds = lifetime_seconds
        self.clock = clock
        self._sessions: dict[str, Session] = {}

    def open(self, operator: str) -> Session:
        """A new session for ``operator``."""
        self._sweep()
        session = Session(
            session_id=secrets.token_urlsafe(32),
            operator=operator,
            csrf_token=secrets.token_urlsafe(32),
            expires_at=self.clock() + self.lifetime_seconds,
        )
        self._sessions[session.session_id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id, if any."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if session.expires_at <= self.clock():
            self.close(session_id)
            return None
        return session

    def close(self, session_id: str) -> None:
        """End one session (unknown ids are ignored)."""
        self._sessions.pop(session_id, None)

    def close_operator(self, operator: str) -> None:
        """End every session of ``operator``."""
        for session_id in [s.session_id for s in self._sessions.values() if s.operator == operator]:
            self.close(session_id)

    def _sweep(self) -> None:
        now = self.clock()
        for session_id in [s.session_id for s in self._sessions.values() if s.expires_at <= now]:
            self.close(session_id)
        while len(self._sessions) >= _MAX_SESSIONS:
            self.close(next(iter(self._sessions)))
