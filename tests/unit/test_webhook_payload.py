"""Webhook pieces without a network: signatures, the payload, URL checks and backoff."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.ledger.webhook_models import (
    InvalidWebhookSignature,
    InvalidWebhookUrl,
    Webhook,
    WebhookDelivery,
    check_webhook_url,
    shown_url,
)
from supervisor.redact import text_redactor
from supervisor.services.webhook_payload import (
    ARGS_PREVIEW_CHARS,
    args_preview,
    decision_url,
    mrkdwn,
    request_body,
)
from supervisor.services.webhook_signing import (
    ReplayGuard,
    sign,
    signature_header,
    verify_request,
    verify_signature,
)
from supervisor.services.webhooks import RetryPolicy

SECRET = "whsec_test-secret-value"
NOW = datetime(2030, 1, 1, tzinfo=UTC)
NO_ENV = text_redactor(environ={})


def _webhook(**overrides: object) -> Webhook:
    values: dict[str, object] = {
        "webhook_id": "w" * 32, "url": "https://hooks.example/x", "format": "json",
        "created_at": NOW, "created_by": "op@host",
    }  # fmt: skip
    values.update(overrides)
    return Webhook.model_validate(values)


def _delivery(proposal_id: str | None = "p" * 32) -> WebhookDelivery:
    return WebhookDelivery(
        delivery_id="d" * 32, webhook_id="w" * 32, proposal_id=proposal_id,
        event="blocked" if proposal_id else "test", state="pending", created_at=NOW,
        updated_at=NOW, next_attempt_at=NOW,
    )  # fmt: skip


def _proposal(**overrides: object) -> Proposal:
    values: dict[str, object] = {
        "proposal_id": "p" * 32, "tool_name": "send_email", "tool_schema_hash": "s" * 64,
        "arguments": {"to": "a@b.c"}, "args_hash": "h" * 64, "owner": "mailer",
        "status": ProposalStatus.PENDING, "created_at": NOW, "updated_at": NOW,
        "expires_at": NOW + timedelta(hours=1), "policy_reason": "sends mail",
    }  # fmt: skip
    values.update(overrides)
    return Proposal.model_validate(values)


def test_a_signature_verifies_and_any_change_is_refused() -> None:
    body = b'{"a":1}'
    header = signature_header(SECRET, 1_900_000_000, body)
    assert header == "sha256=" + sign(SECRET, 1_900_000_000, body)
    verify_signature(SECRET, "1900000000", body, header, now=1_900_000_010)
    refused = [
        (SECRET, "1900000000", b'{"a":2}', header),
        ("whsec_other", "1900000000", body, header),
        (SECRET, "1900000001", body, header),
        (SECRET, "1900000000", body, header.replace("sha256=", "sha1=")),
        (SECRET, "1900000000", body, None),
        (SECRET, "19e8", body, header),
        (SECRET, "-1900000000", body, header),
    ]
    for secret, timestamp, candidate, given in refused:
        with pytest.raises(InvalidWebhookSignature):
            verify_signature(secret, timestamp, candidate, given, now=1_900_000_010)


def test_old_and_far_future_timestamps_are_refused_as_replays() -> None:
    body = b"{}"
    header = signature_header(SECRET, 1_900_000_000, body)
    for now in (1_900_000_000 + 301, 1_900_000_000 - 301):
        with pytest.raises(InvalidWebhookSignature, match="replayed or delayed"):
            verify_signature(SECRET, 1_900_000_000, body, header, 300, now=now)
    verify_signature(SECRET, 1_900_000_000, body, header, 300, now=1_900_000_299)


def test_verify_request_reads_headers_in_any_case_and_refuses_a_repeat() -> None:
    body = json.dumps({"event": "proposal.blocked"}).encode()
    headers = {
        "x-supervisor-timestamp": "1900000000",
        "X-SUPERVISOR-SIGNATURE": signature_header(SECRET, 1_900_000_000, body),
        "X-Supervisor-Delivery": "d1",
    }
    guard = ReplayGuard(capacity=2)
    event = verify_request(SECRET, headers, body, replays=guard, now=1_900_000_000)
    assert event == {"event": "proposal.blocked"}
    with pytest.raises(InvalidWebhookSignature, match="received before"):
        verify_request(SECRET, headers, body, replays=guard, now=1_900_000_000)
    assert guard.first_time("d2") and guard.first_time("d3") and guard.first_time("d1")


def test_the_args_preview_redacts_secrets_and_is_cut() -> None:
    preview = args_preview(
        {"api_key": "plain-looking-value", "nested": {"password": "x" * 8},
         "note": "Authorization: Bearer abc.def.ghi", "to": "a@b.c"},
        NO_ENV,
    )  # fmt: skip
    assert "plain-looking-value" not in preview and "xxxxxxxx" not in preview
    assert "abc.def.ghi" not in preview
    assert '"to":"a@b.c"' in preview
    long = args_preview({"text": "y" * 5000}, NO_ENV)
    assert len(long) == ARGS_PREVIEW_CHARS and long.endswith("…")


def test_the_json_event_holds_what_an_approver_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUPERVISOR_PUBLIC_URL", raising=False)
    body = request_body(_webhook(), _delivery(), _proposal(risk="high"), NOW, NO_ENV)
    event = json.loads(body)
    assert event["event"] == "proposal.blocked" and event["decision_url"] is None
    assert event["proposal"]["tool"] == "send_email"
    assert event["proposal"]["agent"] == "mailer" and event["proposal"]["risk"] == "high"
    assert event["proposal"]["expires_at"] == (NOW + timedelta(hours=1)).isoformat()
    monkeypatch.setenv("SUPERVISOR_PUBLIC_URL", "https://sup.example/")
    link = f"/p/{'p' * 32}?h={'h' * 64}"
    assert decision_url(_webhook(), _proposal()) == "https://sup.example" + link
    hooked = _webhook(base_url="https://own.example")
    assert decision_url(hooked, _proposal()) == "https://own.example" + link
    assert decision_url(hooked, None) is None
    test_event = json.loads(request_body(_webhook(), _delivery(None), None, NOW, NO_ENV))
    assert test_event["event"] == "webhook.test" and test_event["proposal"] is None


def test_slack_text_is_escaped_and_hidden_characters_shown() -> None:
    assert mrkdwn("<!channel> & <@U1>") == "&lt;!channel&gt; &amp; &lt;@U1&gt;"
    assert mrkdwn("a\u202eb\nc") == "a\\u202eb\\u000ac"
    proposal = _proposal(tool_name="x`<!here>`", owner="<!channel>")
    message = json.loads(request_body(_webhook(format="slack"), _delivery(), proposal, NOW,
                                      NO_ENV))  # fmt: skip
    assert "<!" not in json.dumps(message)
    assert message["unfurl_links"] is False


def test_webhook_urls_are_checked_and_shown_without_credentials() -> None:
    assert check_webhook_url(" https://h.example/a ") == "https://h.example/a"
    for bad in (
        "",
        "ftp://h/x",
        "javascript:alert(1)",
        "https:///nohost",
        "http://h/a b",
        "http://h/<x>",
        "http://h:99999/",
        "file:///etc/passwd",
        "h.example/x",
    ):
        with pytest.raises(InvalidWebhookUrl):
            check_webhook_url(bad)
    assert shown_url("https://u:pw@hooks.slack.com/services/T0/B0/XYZ?t=1") == (
        "https://hooks.slack.com/services/…?…"
    )
    assert shown_url("http://127.0.0.1:8080/hook") == "http://127.0.0.1:8080/hook"
    assert shown_url("http://[::1]:9/") == "http://[::1]:9/"


def test_backoff_doubles_up_to_the_cap_and_honours_retry_after() -> None:
    policy = RetryPolicy(max_attempts=5, base_seconds=5, cap_seconds=30)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [5, 10, 20, 30, 30]
    assert policy.delay(1, retry_after=12) == 12
    assert policy.delay(1, retry_after=999) == 30


def test_the_documented_stdlib_check_accepts_our_signatures_and_refuses_others() -> None:
    import re
    import time
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "notify.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", doc, re.MULTILINE | re.DOTALL)
    [snippet] = [block for block in blocks if "def verify(" in block]
    namespace: dict[str, object] = {}
    exec(compile(snippet, "docs/notify.md", "exec"), namespace)
    verify = namespace["verify"]
    assert callable(verify)
    body, now = b'{"event":"proposal.blocked"}', int(time.time())
    header = signature_header(SECRET, now, body)
    assert verify(SECRET, str(now), body, header) is True
    assert verify(SECRET, str(now), body + b" ", header) is False
    assert (
        verify(SECRET, str(now - 3600), body, signature_header(SECRET, now - 3600, body)) is False
    )
