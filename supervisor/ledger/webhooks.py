"""Ledger services for webhooks: adding and removing receivers (audited), queueing one
delivery per blocked proposal, claiming due deliveries and recording each attempt.

A proposal is *blocked* when it is ``pending``: a call that a rule or a grant decides is
recorded decided when it is proposed and never is (the same definition the terminal notices of
:mod:`supervisor.services.notify` use). A webhook announces the blocked proposals created
since it was added and not expired yet, never the backlog it found.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from supervisor.ledger.base import LedgerBase
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.webhook_models import (
    WEBHOOK_ADD,
    WEBHOOK_REMOVE,
    WEBHOOK_SUBJECT_PREFIX,
    DeliveryEvent,
    DeliveryState,
    Webhook,
    WebhookDelivery,
    WebhookFormat,
    WebhookNotFound,
    WebhookSecret,
    check_webhook_url,
    shown_url,
)

#: Blocked proposals queued per pass (the next pass queues the rest).
QUEUE_BATCH = 500


def new_signing_secret() -> str:
    """A fresh shared HMAC secret: ``whsec_`` and 32 random bytes, URL-safe base64."""
    return "whsec_" + secrets.token_urlsafe(32)


def _who() -> str:
    identity = EnvironmentIdentity.current()
    return f"{identity.user}@{identity.host}"


class WebhookServiceMixin(LedgerBase):
    """Webhooks and their deliveries."""

    def add_webhook(
        self, url: str, *, format: WebhookFormat = "json", base_url: str | None = None
    ) -> WebhookSecret:
        """Add a receiver of blocked-proposal events, with a new signing secret.

        Args:
            url: Where to POST (http or https).
            format: ``json`` or ``slack``.
            base_url: The public URL of the decision pages (``{base_url}/p/{id}?h={args_hash}``).

        Returns:
            The webhook and its secret: show the secret to the operator once, now.

        Raises:
            InvalidWebhookUrl: ``url`` or ``base_url`` is not an http(s) URL.
        """
        url = check_webhook_url(url)
        if base_url is not None:
            base_url = check_webhook_url(base_url, option="--base-url").rstrip("/")
        now = self._now()
        who = _who()
        webhook = Webhook(
            webhook_id=uuid.uuid4().hex, url=url, format=format, base_url=base_url,
            created_at=now, created_by=who,
        )  # fmt: skip
        secret = new_signing_secret()
        with self.repository.write() as tx:
            tx.insert_webhook(webhook, secret)
            tx.append_audit(
                at=now, actor=who, action=WEBHOOK_ADD,
                subject=WEBHOOK_SUBJECT_PREFIX + webhook.webhook_id,
                payload={"format": format, "url": shown_url(url), "base_url": base_url},
            )  # fmt: skip
        return WebhookSecret(webhook=webhook, secret=secret)

    def webhooks(self, *, include_removed: bool = False) -> list[Webhook]:
        """The webhooks, oldest first (``include_removed``: removed ones too)."""
        with self.repository.read() as tx:
            return tx.webhooks(include_removed=include_removed)

    def webhook(self, webhook_id: str) -> Webhook:
        """One webhook by its full id (removed or not).

        Raises:
            WebhookNotFound: None has it.
        """
        with self.repository.read() as tx:
            found = tx.webhook_secrets([webhook_id]).get(webhook_id)
        if found is None:
            raise WebhookNotFound(webhook_id)
        return found.webhook

    def webhook_secrets(self, webhook_ids: Sequence[str]) -> dict[str, WebhookSecret]:
        """The webhooks with these ids and their signing secrets, for a sender to sign with."""
        with self.repository.read() as tx:
            return tx.webhook_secrets(list(webhook_ids))

    def remove_webhook(self, webhook_id: str) -> Webhook:
        """Stop sending to a webhook (its delivery record stays).

        Raises:
            WebhookNotFound: No live webhook has that id.
        """
        now = self._now()
        who = _who()
        with self.repository.write() as tx:
            if not tx.remove_webhook(webhook_id, now, who):
                raise WebhookNotFound(webhook_id)
            tx.append_audit(
                at=now, actor=who, action=WEBHOOK_REMOVE,
                subject=WEBHOOK_SUBJECT_PREFIX + webhook_id, payload={},
            )  # fmt: skip
            found = tx.webhook_secrets([webhook_id])[webhook_id]
        return found.webhook

    # deliveries --------------------------------------------------------------------------
    def _new_delivery(
        self, webhook_id: str, proposal_id: str | None, event: DeliveryEvent, now: datetime
    ) -> WebhookDelivery:
        return WebhookDelivery(
            delivery_id=uuid.uuid4().hex, webhook_id=webhook_id, proposal_id=proposal_id,
            event=event, state="pending", created_at=now, updated_at=now, next_attempt_at=now,
        )  # fmt: skip

    def queue_blocked_deliveries(self, limit: int = QUEUE_BATCH) -> int:
        """Queue a ``blocked`` delivery for each (live webhook, blocked proposal) without one.

        Returns:
            How many this call queued (another sender may have queued some first).
        """
        now = self._now()
        with self.repository.read() as tx:
            missing = tx.blocked_without_delivery(now, limit)
        if not missing:
            return 0
        queued = 0
        with self.repository.write(audited=False) as tx:
            for webhook_id, proposal_id in missing:
                delivery = self._new_delivery(webhook_id, proposal_id, "blocked", now)
                queued += tx.queue_delivery(delivery)
        return queued

    def queue_test_delivery(self, webhook_id: str) -> WebhookDelivery:
        """Queue one ``test`` event for a live webhook (attempted once, never retried).

        Raises:
            WebhookNotFound: No live webhook has that id.
        """
        if not any(hook.webhook_id == webhook_id for hook in self.webhooks()):
            raise WebhookNotFound(webhook_id)
        delivery = self._new_delivery(webhook_id, None, "test", self._now())
        with self.repository.write(audited=False) as tx:
            tx.queue_delivery(delivery)
        return delivery

    def claim_due_deliveries(
        self,
        holder: str,
        *,
        claim_seconds: float,
        limit: int = 50,
        only: Sequence[str] = (),
    ) -> list[WebhookDelivery]:
        """Claim up to ``limit`` due deliveries for ``holder`` (each attempt counted).

        A claim lasts ``claim_seconds``: a sender that dies mid-attempt leaves it to another
        once it lapses (so a receiver can see one event twice then, with the same delivery
        id). ``only``: claim just these deliveries, if due.
        """
        now = self._now()
        until = now + timedelta(seconds=claim_seconds)
        with self.repository.read() as tx:
            due = list(only) if only else tx.due_delivery_ids(now, limit)
        claimed: list[WebhookDelivery] = []
        for delivery_id in due:
            with self.repository.write(audited=False) as tx:
                delivery = tx.claim_delivery(delivery_id, holder, now, until)
            if delivery is not None:
                claimed.append(delivery)
        return claimed

    def finish_delivery_attempt(
        self,
        delivery: WebhookDelivery,
        holder: str,
        *,
        state: DeliveryState,
        status: int | None,
        error: str | None,
        retry_at: datetime | None = None,
    ) -> bool:
        """Record how a claimed attempt went and release the claim.

        Args:
            delivery: The delivery as claimed.
            holder: The claim's holder.
            state: ``pending`` (retry at ``retry_at``), ``delivered``, ``failed`` or
                ``skipped``.
            status: The HTTP status answered (``None``: no answer).
            error: What went wrong (``None`` on success), already cut short.
            retry_at: When a ``pending`` delivery is due again.

        Returns:
            False when the claim had lapsed and another sender took the delivery over.
        """
        now = self._now()
        values: dict[str, Any] = {
            "state": state, "last_status": status, "last_error": error, "updated_at": now,
        }  # fmt: skip
        if state == "delivered":
            values["delivered_at"] = now
        if state == "pending":
            values["next_attempt_at"] = retry_at or now
        with self.repository.write(audited=False) as tx:
            return tx.finish_attempt(delivery.delivery_id, holder, **values)

    def deliveries(
        self,
        *,
        states: Sequence[DeliveryState] = (),
        webhook_id: str | None = None,
        limit: int = 100,
    ) -> list[WebhookDelivery]:
        """Deliveries, newest first, optionally of some states or of one webhook."""
        with self.repository.read() as tx:
            return tx.deliveries(states=states, webhook_id=webhook_id, limit=limit)

    def delivery(self, delivery_id: str) -> WebhookDelivery | None:
        """One delivery by id, or ``None``."""
        with self.repository.read() as tx:
            return tx.delivery(delivery_id)
