"""What a webhook receives: the JSON event, or a Slack message, for one blocked proposal.

The JSON event (``format json``)::

    {"event": "proposal.blocked", "delivery_id": "...", "webhook_id": "...",
     "sent_at": "2026-12-04T18:00:00+00:00", "decision_url": "https://sup.example/p/<id>?h=<args_hash>",
     "proposal": {"id": "...", "tool": "send_email", "agent": "mailer", "runtime": "sdk",
                  "user": null, "thread_id": "t-1", "reason": "sends email", "risk": null,
                  "domains": ["email"], "args_preview": "{\\"to\\":\\"a@b.c\\", ...}",
                  "args_hash": "...", "created_at": "...", "expires_at": "...",
                  "approvals_required": 1}}

``args_preview`` is the canonical JSON of the arguments with secrets redacted
(:func:`supervisor.redact.redact_value`: values under secret-looking keys, known secret values
and secret shapes) and cut to :data:`ARGS_PREVIEW_CHARS`. Tool names, agent ids, reasons and
arguments come from agents and models: in the JSON event they are data (a receiver must escape
them wherever it shows them); the Slack message has them mrkdwn-escaped (``&``, ``<``, ``>``,
so ``<!channel>`` cannot ping anyone) with hidden characters made visible.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import quote

from supervisor.canonical import canonical_json
from supervisor.ledger.models import Proposal
from supervisor.ledger.webhook_models import Webhook, WebhookDelivery
from supervisor.redact import redact_value, text_redactor
from supervisor.services.rendering import visible_escapes

ARGS_PREVIEW_CHARS = 300
"""Longest ``args_preview`` (characters), ``…`` included."""
TEXT_CHARS = 500
"""Longest reason or other free text in an event."""
PUBLIC_URL_ENV = "SUPERVISOR_PUBLIC_URL"
EVENT_NAMES = {"blocked": "proposal.blocked", "test": "webhook.test"}


def cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit - 1`` characters and ``…``."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def args_preview(arguments: Any, redact_text: Callable[[str], str] | None = None) -> str:
    """Canonical JSON of ``arguments`` with secrets redacted, cut to :data:`ARGS_PREVIEW_CHARS`."""
    # Each string is redacted on its own: a pattern run over the serialised JSON would read
    # past a string's closing quote.
    text = redact_text or text_redactor()
    return cut(canonical_json(redact_value(arguments, text)), ARGS_PREVIEW_CHARS)


def decision_url(webhook: Webhook, proposal: Proposal | None) -> str | None:
    """``{base_url}/p/{proposal_id}?h={args_hash}``, the decision page of exactly this call
    (the page refuses a link without the hash, and a hash that no longer matches): the
    webhook's base URL, else ``SUPERVISOR_PUBLIC_URL``; ``None`` without either (or for a test
    event)."""
    base = webhook.base_url or os.environ.get(PUBLIC_URL_ENV, "").strip()
    if not base or proposal is None:
        return None
    return f"{base.rstrip('/')}/p/{quote(proposal.proposal_id, safe='')}?h={proposal.args_hash}"


def proposal_fields(proposal: Proposal, redact_text: Callable[[str], str]) -> dict[str, Any]:
    """The proposal as an event shows it (no approver context, arguments as a preview)."""
    return {
        "id": proposal.proposal_id,
        "tool": proposal.tool_name,
        "agent": proposal.owner or None,
        "runtime": proposal.runtime,
        "user": proposal.user,
        "thread_id": proposal.thread_id,
        "reason": cut(redact_text(proposal.policy_reason), TEXT_CHARS),
        "risk": proposal.risk,
        "domains": list(proposal.domains),
        "args_preview": args_preview(proposal.arguments, redact_text),
        "args_hash": proposal.args_hash,
        "created_at": proposal.created_at.isoformat(),
        "expires_at": proposal.expires_at.isoformat(),
        "approvals_required": proposal.approvals_required,
    }


def event_document(
    webhook: Webhook,
    delivery: WebhookDelivery,
    proposal: Proposal | None,
    sent_at: datetime,
    redact_text: Callable[[str], str],
) -> dict[str, Any]:
    """The JSON event of one delivery (a test event has ``"proposal": null``)."""
    return {
        "event": EVENT_NAMES[delivery.event],
        "delivery_id": delivery.delivery_id,
        "webhook_id": webhook.webhook_id,
        "sent_at": sent_at.isoformat(),
        "decision_url": decision_url(webhook, proposal),
        "proposal": proposal_fields(proposal, redact_text) if proposal is not None else None,
    }


def mrkdwn(text: str) -> str:
    """Untrusted ``text`` for a Slack mrkdwn field: hidden characters made visible, and
    ``&``, ``<``, ``>`` escaped as Slack asks (no link, mention or ``<!channel>`` survives)."""
    escaped = visible_escapes(text)
    return escaped.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """``text`` inside a mrkdwn code span (a backtick in it cannot close the span)."""
    return "`" + mrkdwn(text).replace("`", "'") + "`"


def slack_document(event: dict[str, Any]) -> dict[str, Any]:
    """A Slack incoming-webhook message (``text`` plus ``blocks``) for a JSON event."""
    proposal = event["proposal"]
    link = event["decision_url"]
    if proposal is None:
        text = "Agent Supervisor: test event from webhook " + mrkdwn(event["webhook_id"][:8])
        return {"text": text, "blocks": [{"type": "section",
                                          "text": {"type": "mrkdwn", "text": text}}]}  # fmt: skip
    agent = mrkdwn(proposal["agent"] or "An agent")
    text = f"Approval needed: {mrkdwn(proposal['tool'])} from {agent}"
    lines = [
        f"*Approval needed:* {_code(proposal['tool'])} from *{agent}*",
        f"*Reason:* {mrkdwn(proposal['reason']) or '-'}",
        f"*Arguments:* {_code(proposal['args_preview'])}",
        f"*Expires:* {mrkdwn(proposal['expires_at'])}",
    ]
    if proposal["risk"]:
        lines.insert(2, f"*Risk:* {mrkdwn(proposal['risk'])}")
    if link:  # built from the operator's base URL (checked: no <>|) and a hex id
        lines.append(f"<{link}|Open the decision page>")
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": "Proposal "
                                              + mrkdwn(proposal["id"])}]},
        ],
        "unfurl_links": False,
        "unfurl_media": False,
    }  # fmt: skip


def request_body(
    webhook: Webhook,
    delivery: WebhookDelivery,
    proposal: Proposal | None,
    sent_at: datetime,
    redact_text: Callable[[str], str],
) -> bytes:
    """The bytes POSTed for one delivery, in the webhook's format."""
    event = event_document(webhook, delivery, proposal, sent_at, redact_text)
    document = slack_document(event) if webhook.format == "slack" else event
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
