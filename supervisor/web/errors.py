"""Why the web server refused a request: typed errors with a stable code and an HTTP status."""

from __future__ import annotations

from typing import ClassVar

from supervisor.errors import SupervisorError


class WebRefused(SupervisorError):
    """Base of the web refusals; ``status`` is the HTTP status the page is sent with."""

    code = "web_refused"
    status: ClassVar[int] = 400


class LoginRequired(WebRefused):
    """No session, an expired one, or one of an operator revoked since."""

    code = "login_required"
    status = 401

    def __init__(self) -> None:
        super().__init__(
            "You are not logged in (or your session ended).",
            hint="Log in with your operator token at /login.",
        )


class OriginRefused(WebRefused):
    """A state-changing request whose Origin is not this server (or that named none)."""

    code = "origin_refused"
    status = 403

    def __init__(self, origin: str | None) -> None:
        super().__init__(
            f"The request came from {origin or 'an unnamed origin'}, not from this server; "
            "nothing was decided.",
            hint="Decide from the page this server shows, not from another site.",
        )


class HostRefused(WebRefused):
    """A request for a host name this server does not answer to (DNS rebinding)."""

    code = "host_refused"
    status = 421

    def __init__(self, host: str) -> None:
        super().__init__(
            f"This server does not answer for host {host!r}.",
            hint="Open it by the address `supervisor serve` printed, or pass --public-url.",
        )


class CsrfFailed(WebRefused):
    """The form's anti-forgery token is missing or not this session's."""

    code = "csrf_failed"
    status = 403

    def __init__(self, missing: bool) -> None:
        what = "has no anti-forgery token" if missing else "has the wrong anti-forgery token"
        super().__init__(
            f"The form {what}; nothing was decided.",
            hint="Reload the decision page and decide from it.",
        )


class LinkIncomplete(WebRefused):
    """A decision link without the args hash it was made for."""

    code = "link_incomplete"
    status = 400

    def __init__(self) -> None:
        super().__init__(
            "This decision link names no arguments hash (?h=...), so it cannot be checked.",
            hint="Open the proposal from the list of pending proposals.",
        )


class LinkStale(WebRefused):
    """A link or form for other arguments than the proposal's current ones."""

    code = "stale_link"
    status = 409

    def __init__(self, proposal_id: str) -> None:
        super().__init__(
            f"This link was made for other arguments than proposal {proposal_id[:12]} has now; "
            "nothing was decided.",
            hint="Open the proposal again from the list and review what it will run now.",
            proposal_id=proposal_id,
        )


class PageNotShown(WebRefused):
    """A decision for a page this session was never shown (or already used)."""

    code = "page_not_shown"
    status = 409

    def __init__(self, proposal_id: str) -> None:
        super().__init__(
            f"This session was not shown proposal {proposal_id[:12]} with these arguments "
            "(or already decided from that page); nothing was decided.",
            hint="Open the decision page again and decide from it.",
            proposal_id=proposal_id,
        )


class DecidedTooSoon(WebRefused):
    """A decision that arrived before the page had been shown for the settle time."""

    code = "decided_too_soon"
    status = 409

    def __init__(self, proposal_id: str, shown_for: float, settle: float) -> None:
        super().__init__(
            f"The decision arrived {shown_for:.2f}s after proposal {proposal_id[:12]} was shown "
            f"(at least {settle:.2f}s needed); nothing was decided.",
            hint="Check it is the one you mean, then press the button again.",
            proposal_id=proposal_id,
        )


class ReasonMissing(WebRefused):
    """A rejection without a reason."""

    code = "reason_required"
    status = 400

    def __init__(self) -> None:
        super().__init__(
            "A rejection needs a reason; nothing was decided.",
            hint="Say why in the reason box (the agent and the audit see it).",
        )
