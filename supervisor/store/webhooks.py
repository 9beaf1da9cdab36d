"""Repository operations for webhooks and deliveries. Mixed into
:class:`supervisor.store.repository.LedgerTx`.

Queueing inserts with ``ON CONFLICT DO NOTHING`` on the unique (webhook, proposal, event) key,
so two senders queueing the same blocked proposal leave one row. A claim is one conditional
``UPDATE`` checked by its row count (due, not claimed by a live claim), so one sender attempts
a delivery at a time; recording the outcome is conditional on still holding the claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlmodel import SQLModel

from supervisor.ledger.webhook_models import Webhook, WebhookDelivery, WebhookSecret
from supervisor.store.tables import ProposalOpenRow, ProposalRow
from supervisor.store.webhook_tables import WebhookDeliveryRow, WebhookRow

_WEBHOOK = SQLModel.metadata.tables[WebhookRow.__tablename__]
_DELIVERY = SQLModel.metadata.tables[WebhookDeliveryRow.__tablename__]
_PROPOSAL = SQLModel.metadata.tables[ProposalRow.__tablename__]
_OPEN = SQLModel.metadata.tables[ProposalOpenRow.__tablename__]
_KEY = ["webhook_id", "proposal_id", "event"]


def _webhook(row: Any) -> Webhook:
    return Webhook(
        webhook_id=row.id, url=row.url, format=row.format, base_url=row.base_url,
        created_at=row.created_at, created_by=row.created_by, removed_at=row.removed_at,
        removed_by=row.removed_by,
    )  # fmt: skip


def _delivery(row: Any) -> WebhookDelivery:
    return WebhookDelivery(
        delivery_id=row.id, webhook_id=row.webhook_id, proposal_id=row.proposal_id,
        event=row.event, state=row.state, attempts=row.attempts, last_status=row.last_status,
        last_error=row.last_error, created_at=row.created_at, updated_at=row.updated_at,
        next_attempt_at=row.next_attempt_at, delivered_at=row.delivered_at,
        claimed_by=row.claimed_by, claimed_until=row.claimed_until,
    )  # fmt: skip


class WebhooksMixin:
    """Webhook and delivery persistence."""

    dialect: str

    if TYPE_CHECKING:

        def _execute(self, statement: Any, params: Any = None) -> sa.CursorResult[Any]: ...

    # webhooks ----------------------------------------------------------------------------
    def insert_webhook(self, webhook: Webhook, secret: str) -> None:
        self._execute(
            sa.insert(_WEBHOOK).values(
                id=webhook.webhook_id, url=webhook.url, format=webhook.format,
                base_url=webhook.base_url, secret=secret, created_at=webhook.created_at,
                created_by=webhook.created_by,
            )
        )  # fmt: skip

    def webhooks(self, *, include_removed: bool = False) -> list[Webhook]:
        """Webhooks, oldest first."""
        query = sa.select(_WEBHOOK).order_by(_WEBHOOK.c.created_at, _WEBHOOK.c.id)
        if not include_removed:
            query = query.where(_WEBHOOK.c.removed_at.is_(None))
        return [_webhook(row) for row in self._execute(query)]

    def webhook_secrets(self, webhook_ids: Sequence[str]) -> dict[str, WebhookSecret]:
        """The webhooks with these ids and their signing secrets (removed ones included)."""
        if not webhook_ids:
            return {}
        query = sa.select(_WEBHOOK).where(_WEBHOOK.c.id.in_(list(dict.fromkeys(webhook_ids))))
        return {
            row.id: WebhookSecret(webhook=_webhook(row), secret=row.secret)
            for row in self._execute(query)
        }

    def remove_webhook(self, webhook_id: str, now: datetime, by: str) -> bool:
        """Mark a webhook removed; False when it already was (or does not exist)."""
        result = self._execute(
            sa.update(_WEBHOOK)
            .where(_WEBHOOK.c.id == webhook_id, _WEBHOOK.c.removed_at.is_(None))
            .values(removed_at=now, removed_by=by)
        )
        return result.rowcount == 1

    # deliveries --------------------------------------------------------------------------
    def blocked_without_delivery(self, now: datetime, limit: int) -> list[tuple[str, str]]:
        """(webhook id, proposal id) of pending, unexpired proposals created since a live
        webhook was added that have no ``blocked`` delivery for it yet, oldest first."""
        queued = sa.exists().where(
            _DELIVERY.c.webhook_id == _WEBHOOK.c.id,
            _DELIVERY.c.proposal_id == _OPEN.c.proposal_id,
            _DELIVERY.c.event == "blocked",
        )
        query = (
            sa.select(_WEBHOOK.c.id.label("webhook_id"), _OPEN.c.proposal_id)
            .select_from(
                _OPEN.join(_PROPOSAL, _PROPOSAL.c.id == _OPEN.c.proposal_id).join(
                    _WEBHOOK, _OPEN.c.created_at >= _WEBHOOK.c.created_at
                )
            )
            .where(
                _PROPOSAL.c.status == "pending", _PROPOSAL.c.expires_at > now,
                _WEBHOOK.c.removed_at.is_(None), ~queued,
            )
            .order_by(_OPEN.c.created_at, _OPEN.c.proposal_id, _WEBHOOK.c.id)
            .limit(limit)
        )  # fmt: skip
        return [(row.webhook_id, row.proposal_id) for row in self._execute(query)]

    def queue_delivery(self, delivery: WebhookDelivery) -> bool:
        """Insert a delivery unless one with its (webhook, proposal, event) exists; True when
        this call inserted it."""
        values = {
            "id": delivery.delivery_id, "webhook_id": delivery.webhook_id,
            "proposal_id": delivery.proposal_id, "event": delivery.event,
            "state": delivery.state, "attempts": delivery.attempts,
            "created_at": delivery.created_at, "updated_at": delivery.updated_at,
            "next_attempt_at": delivery.next_attempt_at,
        }  # fmt: skip
        insert: Any = sqlite.insert
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert  # only PostgreSQL ledgers pay for it
        statement = insert(_DELIVERY).values(**values).on_conflict_do_nothing(index_elements=_KEY)
        return self._execute(statement).rowcount == 1

    def due_delivery_ids(self, now: datetime, limit: int) -> list[str]:
        """Pending deliveries due at ``now`` and not claimed by a live claim, oldest due first."""
        query = (
            sa.select(_DELIVERY.c.id)
            .where(*self._claimable(now))
            .order_by(_DELIVERY.c.next_attempt_at, _DELIVERY.c.id)
            .limit(limit)
        )
        return [row.id for row in self._execute(query)]

    @staticmethod
    def _claimable(now: datetime) -> list[Any]:
        return [
            _DELIVERY.c.state == "pending",
            _DELIVERY.c.next_attempt_at <= now,
            sa.or_(_DELIVERY.c.claimed_until.is_(None), _DELIVERY.c.claimed_until < now),
        ]

    def claim_delivery(
        self, delivery_id: str, holder: str, now: datetime, until: datetime
    ) -> WebhookDelivery | None:
        """Claim one due delivery for ``holder`` and count the attempt; ``None`` when another
        sender claimed it first (or it is no longer due)."""
        rows = self._execute(
            sa.update(_DELIVERY)
            .where(_DELIVERY.c.id == delivery_id, *self._claimable(now))
            .values(
                claimed_by=holder, claimed_until=until, attempts=_DELIVERY.c.attempts + 1,
                updated_at=now,
            )
            .returning(*_DELIVERY.c)
        ).all()  # fmt: skip
        return _delivery(rows[0]) if len(rows) == 1 else None

    def finish_attempt(self, delivery_id: str, holder: str, **values: Any) -> bool:
        """Record an attempt's outcome and release the claim, if ``holder`` still holds it."""
        result = self._execute(
            sa.update(_DELIVERY)
            .where(
                _DELIVERY.c.id == delivery_id, _DELIVERY.c.claimed_by == holder,
                _DELIVERY.c.state == "pending",
            )
            .values(claimed_by=None, claimed_until=None, **values)
        )  # fmt: skip
        return result.rowcount == 1

    def delivery(self, delivery_id: str) -> WebhookDelivery | None:
        row = self._execute(sa.select(_DELIVERY).where(_DELIVERY.c.id == delivery_id)).first()
        return _delivery(row) if row else None

    def deliveries(
        self, *, states: Sequence[str] = (), webhook_id: str | None = None, limit: int = 100
    ) -> list[WebhookDelivery]:
        """Deliveries, newest first."""
        query = sa.select(_DELIVERY).order_by(_DELIVERY.c.created_at.desc(), _DELIVERY.c.id.desc())
        if states:
            query = query.where(_DELIVERY.c.state.in_(list(states)))
        if webhook_id is not None:
            query = query.where(_DELIVERY.c.webhook_id == webhook_id)
        return [_delivery(row) for row in self._execute(query.limit(limit))]
