"""Signing webhook requests, and checking a signature on the receiving side.

Each request carries::

    X-Supervisor-Timestamp: 1764870000                 (Unix seconds when it was signed)
    X-Supervisor-Signature: sha256=<hex HMAC-SHA256(secret, f"{timestamp}." + body)>
    X-Supervisor-Delivery: <delivery id>                (the same on every retry of an event)

The secret is the webhook's shared HMAC secret (printed once by ``supervisor notify add``).
Signing the timestamp with the body lets a receiver refuse an old request replayed later
(:func:`verify_signature`'s ``tolerance``); remembering delivery ids refuses a replay inside
the window too (:class:`ReplayGuard`). Besides its error type this module uses only the
standard library.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from supervisor.ledger.webhook_models import InvalidWebhookSignature

SIGNATURE_HEADER = "X-Supervisor-Signature"
TIMESTAMP_HEADER = "X-Supervisor-Timestamp"
DELIVERY_HEADER = "X-Supervisor-Delivery"
EVENT_HEADER = "X-Supervisor-Event"
DEFAULT_TOLERANCE_SECONDS = 300.0
_PREFIX = "sha256="

__all__ = [
    "DEFAULT_TOLERANCE_SECONDS",
    "DELIVERY_HEADER",
    "EVENT_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "ReplayGuard",
    "sign",
    "signature_header",
    "verify_request",
    "verify_signature",
]


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``f"{timestamp}."`` followed by ``body``, keyed by ``secret``."""
    message = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-Supervisor-Signature`` value: ``sha256=<hex>``."""
    return _PREFIX + sign(secret, timestamp, body)


def verify_signature(
    secret: str,
    timestamp: str | int,
    body: bytes,
    header: str | None,
    tolerance: float = DEFAULT_TOLERANCE_SECONDS,
    *,
    now: float | None = None,
) -> None:
    """Check that ``body`` was signed with ``secret`` at ``timestamp``, recently.

    Args:
        secret: The webhook's signing secret.
        timestamp: The ``X-Supervisor-Timestamp`` header as received.
        body: The request body exactly as received (bytes, before any parsing).
        header: The ``X-Supervisor-Signature`` header as received.
        tolerance: Seconds the timestamp may be away from ``now`` (either way).
        now: The receiver's time in Unix seconds (default: the clock).

    Raises:
        InvalidWebhookSignature: The header or timestamp is missing or malformed, the
            timestamp is outside the tolerance (a replay), or the signature does not match
            (compared in constant time).
    """
    if not header or not header.startswith(_PREFIX):
        raise InvalidWebhookSignature("no sha256= signature")
    text = str(timestamp).strip()
    if not text.isascii() or not text.isdigit():
        raise InvalidWebhookSignature("the timestamp is not Unix seconds")
    moment = int(text)
    current = time.time() if now is None else now
    if abs(current - moment) > tolerance:
        raise InvalidWebhookSignature(
            f"the timestamp is {int(current - moment)} s away from now (tolerance "
            f"{int(tolerance)} s): a replayed or delayed request"
        )
    expected = sign(secret, moment, body)
    given = header[len(_PREFIX) :].strip().lower()
    if not hmac.compare_digest(expected.encode(), given.encode()):
        raise InvalidWebhookSignature("the signature does not match the body")


class ReplayGuard:
    """Remembers the delivery ids seen recently, so a request replayed inside the timestamp
    tolerance is refused too (thread-safe, bounded).

    Args:
        capacity: Ids remembered (the oldest are forgotten first).
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, delivery_id: str) -> bool:
        """Record ``delivery_id``; False when it was seen before."""
        with self._lock:
            if delivery_id in self._seen:
                return False
            self._seen[delivery_id] = None
            while len(self._seen) > self.capacity:
                self._seen.popitem(last=False)
            return True


def verify_request(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance: float = DEFAULT_TOLERANCE_SECONDS,
    replays: ReplayGuard | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The receiving side in one call: check a request's signature, then parse its body.

    Args:
        secret: The webhook's signing secret.
        headers: The request headers (any case).
        body: The body exactly as received.
        tolerance: See :func:`verify_signature`.
        replays: Refuse a delivery id seen before (a retry of an event the receiver already
            accepted also has it: answer 2xx to such a repeat without acting twice).
        now: See :func:`verify_signature`.

    Returns:
        The parsed JSON body.

    Raises:
        InvalidWebhookSignature: As :func:`verify_signature`, or the delivery id was seen.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    verify_signature(
        secret, lowered.get(TIMESTAMP_HEADER.lower(), ""), body,
        lowered.get(SIGNATURE_HEADER.lower()), tolerance, now=now,
    )  # fmt: skip
    delivery_id = lowered.get(DELIVERY_HEADER.lower(), "")
    if replays is not None and not replays.first_time(delivery_id):
        raise InvalidWebhookSignature(f"delivery {delivery_id!r} was received before")
    parsed: dict[str, Any] = json.loads(body)
    return parsed
