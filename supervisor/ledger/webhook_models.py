"""Webhooks as the ledger hands them out, their deliveries, and the errors about them.

A :class:`Webhook` never carries its signing secret out of the sender's hands by accident: the
secret is only on :class:`WebhookSecret` (what ``add`` returns once, and what a sender loads
to sign) and is excluded from :meth:`Webhook.model_dump`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from supervisor.errors import SupervisorError

WebhookFormat = Literal["json", "slack"]
WEBHOOK_FORMATS: tuple[WebhookFormat, ...] = ("json", "slack")
DeliveryState = Literal["pending", "delivered", "failed", "skipped"]
"""``pending``: due now or at ``next_attempt_at``; ``delivered``: a 2xx answer; ``failed``: a
final error (a 4xx other than 429, or every attempt used); ``skipped``: not sent because the
proposal was decided (or the webhook removed) before an attempt succeeded."""
DeliveryEvent = Literal["blocked", "test"]
WEBHOOK_SUBJECT_PREFIX = "webhook:"
"""Audit subjects of webhooks are ``webhook:<id>``."""
WEBHOOK_ADD = "webhook_add"
WEBHOOK_REMOVE = "webhook_remove"


class Webhook(BaseModel):
    """One receiver of events, without its secret.

    Attributes:
        webhook_id: Its id.
        url: Where events are POSTed (may hold credentials: show it with
            :func:`supervisor.services.webhook_payload.shown_url`).
        format: ``json`` (the documented payload) or ``slack`` (an incoming-webhook message).
        base_url: The public URL of the decision pages, for the link in each event (``None``:
            ``SUPERVISOR_PUBLIC_URL`` of the sending process, else no link).
        created_at, created_by: When, and by which OS identity (``user@host``).
        removed_at, removed_by: Set once removed (nothing more is sent to it).
    """

    model_config = ConfigDict(frozen=True)

    webhook_id: str
    url: str
    format: WebhookFormat
    base_url: str | None = None
    created_at: datetime
    created_by: str
    removed_at: datetime | None = None
    removed_by: str | None = None


class WebhookSecret(BaseModel):
    """A webhook with the shared HMAC secret its events are signed with."""

    model_config = ConfigDict(frozen=True)

    webhook: Webhook
    secret: str = Field(repr=False)


class WebhookDelivery(BaseModel):
    """One event for one webhook: its attempts and how they went.

    Attributes:
        delivery_id: Its id (sent as ``X-Supervisor-Delivery``: receivers drop repeats).
        webhook_id: The webhook.
        proposal_id: The proposal it is about (``None`` for a test event).
        event: ``blocked`` or ``test``.
        state: See :data:`DeliveryState`.
        attempts: Attempts started so far.
        last_status: The HTTP status of the last answer (``None``: no answer).
        last_error: What went wrong last, cut short (untrusted text: escape it to show it).
        next_attempt_at: When a pending delivery is due.
        delivered_at: When a 2xx answer came.
        claimed_by: The sender attempting it now (until ``claimed_until``).
    """

    model_config = ConfigDict(frozen=True)

    delivery_id: str
    webhook_id: str
    proposal_id: str | None
    event: DeliveryEvent
    state: DeliveryState
    attempts: int = 0
    last_status: int | None = None
    last_error: str | None = None
    created_at: datetime
    updated_at: datetime
    next_attempt_at: datetime
    delivered_at: datetime | None = None
    claimed_by: str | None = None
    claimed_until: datetime | None = None


class WebhookError(SupervisorError):
    """Base of the errors about webhooks."""

    code = "webhook_error"


class InvalidWebhookUrl(WebhookError, ValueError):
    """A webhook URL (or a decision-page base URL) is not an http(s) URL a sender can POST to."""

    code = "invalid_webhook_url"

    def __init__(self, reason: str, *, option: str = "URL") -> None:
        super().__init__(
            f"The {option} is not usable: {reason}; nothing was added.",
            hint="Give an absolute http:// or https:// URL with a host, e.g. "
            "https://hooks.example.com/supervisor.",
            reason=reason,
        )


class WebhookNotFound(WebhookError, LookupError):
    """No webhook has that id (or it was removed)."""

    code = "webhook_not_found"

    def __init__(self, webhook_id: str) -> None:
        super().__init__(
            f"No webhook {webhook_id!r}.",
            hint="`supervisor notify list` lists the webhooks.",
            webhook_id=webhook_id,
        )


class InvalidWebhookSignature(WebhookError, ValueError):
    """A request's signature does not prove it came from the sender, or it is too old."""

    code = "invalid_webhook_signature"

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"The webhook signature was refused: {reason}.",
            hint="Check the signing secret printed by `supervisor notify add`, and that the "
            "body is verified exactly as received (before any JSON parsing).",
            reason=reason,
        )


def check_webhook_url(url: str, *, option: str = "URL") -> str:
    """``url`` stripped, if a sender can POST to it: http or https, a host, no whitespace or
    control characters (and none of ``<>|``, which would break a Slack link).

    Raises:
        InvalidWebhookUrl: It is not.
    """
    from urllib.parse import urlsplit

    text = url.strip()
    if not text:
        raise InvalidWebhookUrl("it is empty", option=option)
    if any(ord(char) < 0x21 or ord(char) == 0x7F or char in "<>|\\" for char in text):
        raise InvalidWebhookUrl("it holds spaces, control characters or <>|\\", option=option)
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as error:
        raise InvalidWebhookUrl(f"it cannot be parsed ({error})", option=option) from None
    if parts.scheme.lower() not in ("http", "https"):
        shown = parts.scheme or "none"
        raise InvalidWebhookUrl(f"its scheme is {shown!r}, not http or https", option=option)
    if not parts.hostname:
        raise InvalidWebhookUrl("it has no host", option=option)
    return text


def shown_url(url: str) -> str:
    """``url`` as it may be printed: no credentials, no query, no fragment, and only the first
    path segment (a Slack webhook's path *is* its credential), e.g.
    ``https://hooks.slack.com/services/…``."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(unparsable URL)"
    if ":" in host:
        host = f"[{host}]"
    origin = f"{parts.scheme}://{host}{f':{port}' if port is not None else ''}"
    segments = [segment for segment in parts.path.split("/") if segment]
    path = f"/{segments[0]}" if segments else "/"
    if len(segments) > 1:
        path += "/…"
    if parts.query or parts.fragment:
        path += "?…"
    return origin + path
