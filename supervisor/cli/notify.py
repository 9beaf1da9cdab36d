"""``supervisor notify``: webhooks that announce proposals blocked on a human.

``add webhook URL`` prints the new webhook's id and its signing secret (once: it is never
shown again); ``list``, ``remove`` and ``test`` manage webhooks (an id may be given by a unique
prefix); ``deliveries`` shows each event's attempts, last status and error; ``run`` delivers
until interrupted (``--once``: what is due now) for hosts without the TUI, which delivers too.
URLs are shown without credentials, query or path beyond its first segment. Error texts come
from receivers: they are stored escaped and printed as data.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from supervisor.cli.output import echo_json, echo_line
from supervisor.cli.proposals import db_option, open_ledger
from supervisor.errors import SupervisorError
from supervisor.ledger.webhook_models import (
    WEBHOOK_FORMATS,
    DeliveryState,
    Webhook,
    WebhookDelivery,
    shown_url,
)

_STATES: tuple[DeliveryState, ...] = ("pending", "delivered", "failed", "skipped")


class WebhookTestFailed(SupervisorError, RuntimeError):
    """``notify test`` got no 2xx answer from the receiver."""

    code = "webhook_test_failed"

    def __init__(self, url: str, status: int | None, error: str | None) -> None:
        answer = f"HTTP {status}" if status is not None else "no answer"
        super().__init__(
            f"The test event to {url} was not accepted ({answer}): {error or '-'}.",
            hint="Check the receiver's URL and logs; `supervisor notify deliveries --failed` "
            "keeps the record.",
            status=status,
        )


def _when(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment is not None else "-"


def webhook_json(webhook: Webhook) -> dict[str, Any]:
    """A webhook as printed: no secret, the URL without credentials."""
    return {
        "webhook_id": webhook.webhook_id, "url": shown_url(webhook.url),
        "format": webhook.format, "base_url": webhook.base_url,
        "created_at": webhook.created_at.isoformat(), "created_by": webhook.created_by,
        "removed_at": webhook.removed_at.isoformat() if webhook.removed_at else None,
    }  # fmt: skip


def delivery_json(delivery: WebhookDelivery) -> dict[str, Any]:
    """A delivery as printed (the claim columns left out)."""
    data: dict[str, Any] = delivery.model_dump(mode="json", exclude={"claimed_by", "claimed_until"})
    return data


def delivery_line(delivery: WebhookDelivery) -> str:
    """One line: id, state, attempts, last status, event and proposal, when, error."""
    status = str(delivery.last_status) if delivery.last_status is not None else "-"
    subject = delivery.proposal_id or "-"
    when = {
        "pending": f"next {_when(delivery.next_attempt_at)}",
        "delivered": f"at {_when(delivery.delivered_at)}",
    }.get(delivery.state, f"at {_when(delivery.updated_at)}")
    return (
        f"{delivery.delivery_id[:12]}  {delivery.state:<9}  attempts {delivery.attempts}  "
        f"status {status}  {delivery.event} {subject}  webhook {delivery.webhook_id[:12]}  "
        f"{when}  {delivery.last_error or ''}"
    ).rstrip()


@click.group()
def notify() -> None:
    """Webhooks for proposals blocked on a human: add, list, remove, test, deliveries, run."""


@notify.group("add")
def add() -> None:
    """Add a notification channel."""


@add.command("webhook")
@click.argument("url")
@click.option(
    "--format",
    "webhook_format",
    type=click.Choice(WEBHOOK_FORMATS),
    default="json",
    show_default=True,
    help="json: the documented event; slack: a Slack incoming-webhook message.",
)
@click.option(
    "--base-url",
    metavar="URL",
    default=None,
    help="Public URL of the decision pages: events link to URL/p/ID?h=ARGS_HASH (default: "
    "SUPERVISOR_PUBLIC_URL of the sender).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document (with the secret).")
@db_option  # fmt: skip
def add_webhook(
    url: str, webhook_format: str, base_url: str | None, as_json: bool, db_url: str | None
) -> None:
    """POST every proposal blocked on a human to URL, signed with a new secret.

    The signing secret is printed once: keep it where the receiver verifies requests.
    """
    with open_ledger(db_url) as ledger:
        created = ledger.add_webhook(
            url, format="slack" if webhook_format == "slack" else "json", base_url=base_url
        )
    if as_json:
        echo_json({**webhook_json(created.webhook), "secret": created.secret})
        return
    echo_line(f"added webhook {created.webhook.webhook_id}  {created.webhook.format}  "
              f"{shown_url(created.webhook.url)}")  # fmt: skip
    echo_line(f"signing secret  {created.secret}")
    echo_line("  Shown only now: the receiver checks X-Supervisor-Signature with it "
              "(docs/notify.md).")  # fmt: skip


@notify.command("list")
@click.option("--all", "show_all", is_flag=True, help="Also removed webhooks.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@db_option
def list_webhooks(show_all: bool, as_json: bool, db_url: str | None) -> None:
    """The webhooks (never their secrets)."""
    with open_ledger(db_url, read_only=True) as ledger:
        found = ledger.webhooks(include_removed=show_all)
    if as_json:
        echo_json({"webhooks": [webhook_json(webhook) for webhook in found]})
        return
    if not found:
        echo_line("No webhooks. Add one with `supervisor notify add webhook URL`.")
        return
    for webhook in found:
        removed = f"  removed {_when(webhook.removed_at)}" if webhook.removed_at else ""
        added = f"added {_when(webhook.created_at)} by {webhook.created_by}"
        echo_line(
            f"{webhook.webhook_id}  {webhook.format:<5}  {shown_url(webhook.url)}  {added}{removed}"
        )


@notify.command("remove")
@click.argument("webhook_id")
@click.option("--json", "as_json", is_flag=True, help="Print the removed webhook as JSON.")
@db_option
def remove(webhook_id: str, as_json: bool, db_url: str | None) -> None:
    """Stop sending to a webhook (its deliveries stay on record)."""
    from supervisor.ledger.ids import resolve_id

    with open_ledger(db_url, must_exist=True) as ledger:
        full_id = resolve_id(ledger.repository, "webhook", webhook_id)
        removed = ledger.remove_webhook(full_id)
    if as_json:
        echo_json(webhook_json(removed))
        return
    echo_line(f"removed webhook {removed.webhook_id}  {shown_url(removed.url)}")


@notify.command("test")
@click.argument("webhook_id")
@click.option("--json", "as_json", is_flag=True, help="Print the attempt as JSON.")
@db_option
def test(webhook_id: str, as_json: bool, db_url: str | None) -> None:
    """Send a signed test event to a webhook now (one attempt, recorded)."""
    from supervisor.ledger.ids import resolve_id
    from supervisor.services.webhooks import WebhookSender

    with open_ledger(db_url, must_exist=True) as ledger:
        full_id = resolve_id(ledger.repository, "webhook", webhook_id)
        sender = WebhookSender(ledger)
        try:
            report = sender.send_test(full_id)
        finally:
            sender.close()
    if as_json:
        echo_json({"delivery_id": report.delivery.delivery_id, "state": report.state,
                   "status": report.status, "error": report.error})  # fmt: skip
    if report.state != "delivered":
        raise WebhookTestFailed(report.webhook_url, report.status, report.error)
    if not as_json:
        echo_line(f"delivered test event {report.delivery.delivery_id} to {report.webhook_url} "
                  f"(HTTP {report.status})")  # fmt: skip


@notify.command("deliveries")
@click.option("--failed", is_flag=True, help="Only deliveries that failed for good.")
@click.option(
    "--state",
    "states",
    type=click.Choice(_STATES),
    multiple=True,
    help="Only these states (repeatable).",
)
@click.option("--webhook", "webhook_id", metavar="ID", default=None, help="Only this webhook's.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@db_option  # fmt: skip
def deliveries(
    failed: bool,
    states: tuple[DeliveryState, ...],
    webhook_id: str | None,
    limit: int,
    as_json: bool,
    db_url: str | None,
) -> None:
    """Webhook deliveries, newest first: state, attempts, last HTTP status and error."""
    from supervisor.ledger.ids import resolve_id

    wanted: list[DeliveryState] = list(dict.fromkeys(states))
    if failed and "failed" not in wanted:
        wanted.append("failed")
    with open_ledger(db_url, read_only=True) as ledger:
        full_id = resolve_id(ledger.repository, "webhook", webhook_id) if webhook_id else None
        found = ledger.deliveries(states=wanted, webhook_id=full_id, limit=limit)
    if as_json:
        echo_json({"deliveries": [delivery_json(delivery) for delivery in found]})
        return
    if not found:
        echo_line("No deliveries" + (" in that state." if wanted else " yet."))
        return
    for delivery in found:
        echo_line(delivery_line(delivery))


@notify.command("run")
@click.option("--once", is_flag=True, help="Deliver what is due now, then exit.")
@click.option(
    "--poll",
    type=click.FloatRange(0.05, 3600),
    default=2.0,
    show_default=True,
    help="Longest wait between passes (seconds); a ledger change wakes it sooner.",
)
@click.option(
    "--max-attempts",
    type=click.IntRange(1, 50),
    default=5,
    show_default=True,
    help="Attempts per event before it is failed.",
)
@click.option(
    "--retry-base",
    type=click.FloatRange(0.01, 3600),
    default=5.0,
    show_default=True,
    help="Seconds before the first retry (doubled each time).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 300),
    default=10.0,
    show_default=True,
    help="Seconds one POST may take.",
)
@db_option  # fmt: skip
def run(
    once: bool,
    poll: float,
    max_attempts: int,
    retry_base: float,
    timeout: float,
    db_url: str | None,
) -> None:
    """Deliver webhook events until interrupted (the TUI delivers too; both may run)."""
    from supervisor.cli.notify_run import run_sender

    run_sender(db_url, once=once, poll=poll, max_attempts=max_attempts, retry_base=retry_base,
               timeout=timeout)  # fmt: skip
