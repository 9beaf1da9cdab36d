"""Sending webhook events: one signed POST per blocked proposal, retried with backoff.

:class:`WebhookSender` does one pass: it queues a ``blocked`` delivery for every blocked
proposal each live webhook has not had (the ledger's unique key keeps one per webhook and
proposal however many senders run), claims the due deliveries (one sender at a time each),
POSTs them and records every attempt. A connection error, a timeout, a 429 or a 5xx answer is
retried after ``base * 2**(attempt - 1)`` seconds (capped; a numeric ``Retry-After`` is
honoured up to the cap) until :attr:`RetryPolicy.max_attempts` attempts were made; any other
answer outside 2xx (redirects included: they are not followed) is final. A proposal decided
before an attempt succeeds is not announced any more (``skipped``).

Where it runs: :class:`WebhookDispatcher` runs passes in a background thread of the TUI (woken
when the inbox sees a new blocked proposal, and on a timer for retries), and
``supervisor notify run`` runs them headless. Both may run at once.

The signing secret and the URL of each webhook are added to the ledger's known secrets when
loaded, so no trace event this process writes can hold them; error texts are redacted, made
visible (hidden characters escaped) and cut before they are stored.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from supervisor.errors import SupervisorError
from supervisor.ledger.errors import ProposalNotFound
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.ledger.webhook_models import (
    DeliveryState,
    WebhookDelivery,
    WebhookSecret,
    shown_url,
)
from supervisor.redact import replace_values, text_redactor
from supervisor.services.listeners import Listeners
from supervisor.services.rendering import visible_escapes
from supervisor.services.webhook_payload import cut, request_body
from supervisor.services.webhook_signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signature_header,
)
from supervisor.version import __version__

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

ERROR_CHARS = 300
"""Longest error text stored per attempt."""
ANSWER_BYTES = 4096
"""Most bytes of a failing answer's body read (for its error text)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often, and how far apart, a failing delivery is attempted.

    Attributes:
        max_attempts: Attempts in all (the first included).
        base_seconds: Wait after the first failed attempt; doubled after each further one.
        cap_seconds: Longest wait.
    """

    max_attempts: int = 5
    base_seconds: float = 5.0
    cap_seconds: float = 300.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        wait = min(self.cap_seconds, self.base_seconds * 2.0 ** max(attempt - 1, 0))
        if retry_after is not None:
            wait = min(self.cap_seconds, max(wait, retry_after))
        return wait


@dataclass(frozen=True)
class AttemptReport:
    """How one attempt went (what ``notify run`` prints, and what the tests check)."""

    delivery: WebhookDelivery
    webhook_url: str
    """The webhook's URL as it may be shown (:func:`shown_url`)."""
    state: DeliveryState
    status: int | None
    error: str | None
    retry_at: datetime | None = None

    @property
    def attempt(self) -> int:
        return self.delivery.attempts


def _head(response: httpx.Response, limit: int) -> bytes:
    """At most ``limit`` bytes of an answer's body (a huge answer is not read to its end)."""
    read = b""
    for chunk in response.iter_bytes():
        read += chunk
        if len(read) >= limit:
            break
    return read[:limit]


def _retry_after(value: str | None) -> float | None:
    if value is None or not value.strip().isdigit():
        return None
    return float(value.strip())


class WebhookSender:
    """Delivers due webhook events from one ledger.

    Args:
        ledger: The ledger whose blocked proposals are announced.
        retry: Attempts and backoff.
        timeout: Seconds one POST may take (connect, write, read).
        client: The HTTP client (default: a new ``httpx.Client`` that follows no redirect).
        on_attempt: Called after every attempt (in the sending thread).
    """

    def __init__(
        self,
        ledger: ApprovalLedger,
        *,
        retry: RetryPolicy | None = None,
        timeout: float = 10.0,
        client: httpx.Client | None = None,
        on_attempt: Callable[[AttemptReport], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self._client = client
        self._own_client = client is None
        self.on_attempt = on_attempt
        self.holder = f"webhooks:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._redact = text_redactor()
        self._lock = threading.Lock()

    @property
    def client(self) -> httpx.Client:
        """The HTTP client, made on first use (a TUI without webhooks never imports httpx)."""
        if self._client is None:
            import httpx

            self._client = httpx.Client(
                timeout=self.timeout, follow_redirects=False,
                headers={"User-Agent": f"agent-supervisor/{__version__}"},
            )  # fmt: skip
        return self._client

    def close(self) -> None:
        """Close the HTTP client if this sender made it."""
        if self._own_client and self._client is not None:
            self._client.close()
            self._client = None

    @property
    def claim_seconds(self) -> float:
        """How long a claim lasts: longer than one attempt can take."""
        return 2 * self.timeout + 30.0

    def deliver_due(self) -> list[AttemptReport]:
        """One pass: queue the blocked proposals not announced yet, attempt what is due.

        Raises:
            LedgerUnavailable, LedgerBusy: The ledger cannot be read or written now.
        """
        with self._lock:  # one pass at a time per sender (a wake during a pass waits)
            self.ledger.queue_blocked_deliveries()
            claimed = self.ledger.claim_due_deliveries(
                self.holder, claim_seconds=self.claim_seconds
            )
            return self._attempt_all(claimed)

    def send_test(self, webhook_id: str) -> AttemptReport:
        """Send one test event to a live webhook now (one attempt, not retried).

        Raises:
            WebhookNotFound: No live webhook has that id.
        """
        delivery = self.ledger.queue_test_delivery(webhook_id)
        with self._lock:
            claimed = self.ledger.claim_due_deliveries(
                self.holder, claim_seconds=self.claim_seconds, only=[delivery.delivery_id]
            )
            reports = self._attempt_all(claimed)
        if reports:
            return reports[0]
        return AttemptReport(delivery, "", "skipped", None, "another sender took it")

    def _attempt_all(self, claimed: list[WebhookDelivery]) -> list[AttemptReport]:
        if not claimed:
            return []
        hooks = self.ledger.webhook_secrets([delivery.webhook_id for delivery in claimed])
        for hook in hooks.values():
            self.ledger.trace_secrets.add(hook.secret, hook.webhook.url)
        reports = []
        for delivery in claimed:
            report = self._attempt(delivery, hooks.get(delivery.webhook_id))
            reports.append(report)
            if self.on_attempt is not None:
                self.on_attempt(report)
        return reports

    def _proposal(self, delivery: WebhookDelivery) -> tuple[Proposal | None, str | None]:
        if delivery.proposal_id is None:
            return None, None
        try:
            proposal = self.ledger.get(delivery.proposal_id)
        except ProposalNotFound:
            return None, "the proposal is gone (purged)"
        if proposal.status is not ProposalStatus.PENDING:
            return proposal, f"the proposal was {proposal.status.value} before delivery"
        if proposal.expires_at <= self.ledger.clock.now():
            return proposal, "the proposal expired before delivery"
        return proposal, None

    def _attempt(self, delivery: WebhookDelivery, hook: WebhookSecret | None) -> AttemptReport:
        shown = shown_url(hook.webhook.url) if hook is not None else "-"
        proposal: Proposal | None = None
        skip: str | None = None
        if hook is None or hook.webhook.removed_at is not None:
            skip = "the webhook was removed"
        else:
            proposal, skip = self._proposal(delivery)
        if skip is not None or hook is None:
            return self._finish(delivery, shown, "skipped", None, skip)
        now = self.ledger.clock.now()
        body = request_body(hook.webhook, delivery, proposal, now, self._redact)
        timestamp = int(now.timestamp())
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature_header(hook.secret, timestamp, body),
            TIMESTAMP_HEADER: str(timestamp),
            DELIVERY_HEADER: delivery.delivery_id,
            EVENT_HEADER: delivery.event,
        }
        status, error, retry_after, retryable = self._post(hook, body, headers)
        if status is not None and 200 <= status < 300:
            return self._finish(delivery, shown, "delivered", status, None)
        final = (
            not retryable or delivery.event == "test"
            or delivery.attempts >= self.retry.max_attempts
        )  # fmt: skip
        if final:
            return self._finish(delivery, shown, "failed", status, error)
        wait = self.retry.delay(delivery.attempts, retry_after)
        retry_at = self.ledger.clock.now() + timedelta(seconds=wait)
        return self._finish(delivery, shown, "pending", status, error, retry_at)

    def _post(
        self, hook: WebhookSecret, body: bytes, headers: dict[str, str]
    ) -> tuple[int | None, str | None, float | None, bool]:
        """(status, error, Retry-After seconds, retryable) of one POST."""
        import httpx

        try:
            with self.client.stream(
                "POST", hook.webhook.url, content=body, headers=headers
            ) as response:
                status = response.status_code
                retry_after = _retry_after(response.headers.get("Retry-After"))
                detail = b"" if 200 <= status < 300 else _head(response, ANSWER_BYTES)
        except httpx.TimeoutException as error:
            return None, self._error_text(hook, f"timed out ({type(error).__name__})"), None, True
        except httpx.HTTPError as error:
            return None, self._error_text(hook, f"{type(error).__name__}: {error}"), None, True
        except (httpx.InvalidURL, ValueError) as error:  # nothing a retry can change
            return None, self._error_text(hook, f"{type(error).__name__}: {error}"), None, False
        if 200 <= status < 300:
            return status, None, None, False
        answer = detail.decode("utf-8", errors="replace")
        text = self._error_text(hook, f"HTTP {status}" + (f": {answer}" if answer else ""))
        return status, text, retry_after, status == 429 or status >= 500

    def _error_text(self, hook: WebhookSecret, text: str) -> str:
        """Untrusted text made safe to store and show: secrets out, hidden characters
        escaped, cut short."""
        cleaned = replace_values(text, [hook.secret, hook.webhook.url])
        return cut(visible_escapes(self._redact(cleaned)), ERROR_CHARS)

    def _finish(
        self,
        delivery: WebhookDelivery,
        shown: str,
        state: DeliveryState,
        status: int | None,
        error: str | None,
        retry_at: datetime | None = None,
    ) -> AttemptReport:
        self.ledger.finish_delivery_attempt(
            delivery, self.holder, state=state, status=status, error=error, retry_at=retry_at
        )
        return AttemptReport(delivery, shown, state, status, error, retry_at)


class WebhookDispatcher:
    """Runs a :class:`WebhookSender` in a background thread: a pass at start, one on every
    :meth:`wake` (a new blocked proposal), and one every ``poll_seconds`` (retries that came
    due). The thread never touches a UI; failures go to ``on_error``.

    Args:
        sender: Does the passes.
        poll_seconds: Longest wait between passes.
        on_error: Called with a pass's typed error (the ledger unreachable, say).
    """

    def __init__(
        self,
        sender: WebhookSender,
        *,
        poll_seconds: float = 2.0,
        on_error: Callable[[SupervisorError], None] | None = None,
    ) -> None:
        self.sender = sender
        self.poll_seconds = poll_seconds
        self.on_error = on_error
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listeners: Listeners[AttemptReport] = Listeners()

    def subscribe(self, listener: Callable[[AttemptReport], None]) -> None:
        """Call ``listener`` (in the dispatcher's thread) after every attempt."""
        self._listeners.subscribe(listener)

    def unsubscribe(self, listener: Callable[[AttemptReport], None]) -> None:
        """Stop calling ``listener``."""
        self._listeners.unsubscribe(listener)

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="webhook-dispatcher", daemon=True
            )
            self._thread.start()

    def wake(self) -> None:
        """Run a pass now (returns at once)."""
        self._wake.set()

    def stop(self, timeout: float | None = None) -> None:
        """End the thread after its current pass and close the sender."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(self.sender.timeout + 5.0 if timeout is None else timeout)
        self.sender.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                for report in self.sender.deliver_due():
                    self._listeners.publish(report)
            except SupervisorError as error:
                logger.warning("webhook pass failed: %s", error.code)
                if self.on_error is not None:
                    self.on_error(error)
            except Exception as error:  # keep delivering: the next pass may succeed
                logger.error("webhook pass failed: %s", type(error).__name__)
            self._wake.wait(self.poll_seconds)
