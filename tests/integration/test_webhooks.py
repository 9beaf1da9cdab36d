"""Webhooks against a real HTTP receiver on loopback: one signed POST per blocked proposal
(rule- and grant-decided calls send none), no secret in any body, retries with backoff that
end delivered or failed, failures visible in ``supervisor notify deliveries`` (the real CLI),
the headless ``supervisor notify run --once`` as a subprocess, and Slack messages whose
untrusted text cannot ping a channel. Both engines where the ledger matters."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from support.cli import SUPERVISOR, assert_one_line_error, run_cli
from support.ledgers import open_ledger
from support.webhook_receiver import Received, webhook_receiver

from supervisor.ledger import ManualClock
from supervisor.ledger.policy import ApprovalPolicy
from supervisor.ledger.service import ApprovalLedger
from supervisor.ledger.webhook_models import InvalidWebhookSignature
from supervisor.services.webhook_signing import verify_request, verify_signature
from supervisor.services.webhooks import RetryPolicy, WebhookSender
from supervisor.store.engine import create_ledger_engine

SCHEMA = "s" * 64
API_KEY = "sk-live-9f8e7d6c5b4a39281706"
PASSWORD = "correct-horse-battery-77"
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
SECRETS = (API_KEY, PASSWORD, GITHUB_TOKEN, "pa55w0rd-in-url")
POLICY = """
[[rules]]
name = "reads are fine"
verdict = "allow"
reason = "reading is routine"
tool = "read_docs"

[[rules]]
name = "no deletes"
verdict = "deny"
reason = "deletes are done by a person"
tool = "delete_everything"
"""


@pytest.fixture
def system_ledger(ledger_url: str) -> Iterator[ApprovalLedger]:
    """A ledger on the real clock (a subprocess sender reads the same time)."""
    yield from open_ledger(ledger_url)


def _signed(secret: str, received: Received, **kwargs: Any) -> dict[str, Any]:
    return verify_request(secret, received.headers, received.body, **kwargs)


def _blocked_proposals(ledger: ApprovalLedger) -> list[str]:
    first = ledger.propose(
        "send_email", SCHEMA,
        {"to": "ops@example.com", "api_key": API_KEY, "body": f"the password is {PASSWORD}"},
        owner="mailer", thread_id="t-1", policy_reason="sends email outside",
    )  # fmt: skip
    second = ledger.propose(
        "http_get", SCHEMA,
        {"url": "https://bob:pa55w0rd-in-url@api.example.com/x", "headers": {
            "Authorization": f"token {GITHUB_TOKEN}"}},
        owner="fetcher", risk="high",
    )  # fmt: skip
    return [first.proposal_id, second.proposal_id]


def test_one_signed_post_per_blocked_proposal_with_no_secret_in_it(
    system_ledger: ApprovalLedger, ledger_url: str
) -> None:
    ledger = system_ledger
    ledger.apply_policy(ApprovalPolicy.from_toml(POLICY, source="test"))
    # A grant made before the webhook exists: the call it allows later is decided by it.
    source = ledger.propose("write_file", SCHEMA, {"path": "/srv/a.md"}, owner="w")
    ledger.approve_similar(source.proposal_id, "operator")
    with webhook_receiver() as receiver:
        added = run_cli("notify", "add", "webhook", receiver.url, "--base-url",
                        "https://sup.example/", "--json", "--db", ledger_url)  # fmt: skip
        assert added.returncode == 0, added.stderr
        created = json.loads(added.stdout)
        secret = created["secret"]
        assert created["url"] == receiver.url.rsplit("/", 1)[0] + "/…"  # path not shown back
        blocked = _blocked_proposals(ledger)
        decided = [
            ledger.propose("read_docs", SCHEMA, {"q": "x"}),
            ledger.propose("delete_everything", SCHEMA, {"really": True}),
            ledger.propose("write_file", SCHEMA, {"path": "/srv/a.md"}, owner="w"),
        ]
        assert [p.decided_by_rule is not None for p in decided] == [True, True, True]
        assert [p.status.value for p in decided] == ["approved", "rejected", "approved"]

        sent = run_cli("notify", "run", "--once", "--db", ledger_url)
        assert sent.returncode == 0, sent.stderr
        assert sent.stdout.count("delivered") == 2, sent.stdout
        again = run_cli("notify", "run", "--once", "--db", ledger_url)
        assert again.returncode == 0 and again.stdout == "", again.stdout

        assert len(receiver.requests) == 2
        events = [_signed(secret, request) for request in receiver.requests]
        assert sorted(event["proposal"]["id"] for event in events) == sorted(blocked)
        assert {request.path for request in receiver.requests} == {"/hooks/supervisor"}
        for request, event in zip(receiver.requests, events, strict=True):
            text = request.body.decode()
            for value in SECRETS:
                assert value not in text, (value, text)
            assert request.headers["X-Supervisor-Delivery"] == event["delivery_id"]
            assert request.headers["X-Supervisor-Event"] == "blocked"
            assert event["event"] == "proposal.blocked"
            proposal = event["proposal"]
            assert event["decision_url"] == (
                f"https://sup.example/p/{proposal['id']}?h={proposal['args_hash']}"
            )
        by_tool = {event["proposal"]["tool"]: event["proposal"] for event in events}
        email = by_tool["send_email"]
        assert email["agent"] == "mailer" and email["thread_id"] == "t-1"
        assert email["runtime"] == "sdk"
        assert email["reason"] == "sends email outside"
        assert '"api_key":"[REDACTED]"' in email["args_preview"]
        assert "ops@example.com" in email["args_preview"]  # what is no secret stays readable
        assert email["args_hash"] == ledger.get(blocked[0]).args_hash
        assert by_tool["http_get"]["risk"] == "high"

    listed = run_cli("notify", "deliveries", "--json", "--db", ledger_url)
    rows = json.loads(listed.stdout)["deliveries"]
    assert sorted((row["state"], row["attempts"], row["last_status"]) for row in rows) == [
        ("delivered", 1, 200), ("delivered", 1, 200)]  # fmt: skip
    shown = run_cli("notify", "list", "--db", ledger_url)
    assert created["webhook_id"] in shown.stdout and secret not in shown.stdout


def test_two_senders_at_once_post_each_blocked_proposal_once(ledger: ApprovalLedger) -> None:
    with webhook_receiver() as receiver:
        ledger.add_webhook(receiver.url)
        for number in range(6):
            ledger.propose("send_email", SCHEMA, {"n": number}, owner="mailer")
        senders = [WebhookSender(ledger), WebhookSender(ledger)]
        barrier = threading.Barrier(2)

        def run(sender: WebhookSender) -> None:
            barrier.wait()
            for _ in range(3):
                sender.deliver_due()

        threads = [threading.Thread(target=run, args=(sender,)) for sender in senders]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        for sender in senders:
            sender.close()
        ids = [json.loads(request.body)["proposal"]["id"] for request in receiver.requests]
    assert len(ids) == 6 and len(set(ids)) == 6
    assert len(ledger.deliveries(states=["delivered"])) == 6


def test_a_failing_receiver_is_retried_with_backoff_until_it_answers(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    with webhook_receiver(statuses=[500, 503]) as receiver:
        created = ledger.add_webhook(receiver.url)
        proposal = ledger.propose("send_email", SCHEMA, {"to": "a@b.c"}, owner="mailer")
        sender = WebhookSender(ledger, retry=RetryPolicy(base_seconds=5))
        first = sender.deliver_due()
        assert [(r.state, r.status, r.attempt) for r in first] == [("pending", 500, 1)]
        assert first[0].retry_at is not None
        assert (first[0].retry_at - clock.now()).total_seconds() == 5
        [waiting] = ledger.deliveries(states=["pending"])
        assert (waiting.attempts, waiting.last_status) == (1, 500)
        assert waiting.next_attempt_at == first[0].retry_at
        assert sender.deliver_due() == []  # not due yet: nothing is sent
        clock.advance(5)
        second = sender.deliver_due()
        assert [(r.state, r.status, r.attempt) for r in second] == [("pending", 503, 2)]
        assert second[0].retry_at is not None
        assert (second[0].retry_at - clock.now()).total_seconds() == 10  # doubled
        clock.advance(10)
        third = sender.deliver_due()
        assert [(r.state, r.status, r.attempt) for r in third] == [("delivered", 200, 3)]
        sender.close()
        assert len(receiver.requests) == 3
        delivery_ids = {request.headers["X-Supervisor-Delivery"] for request in receiver.requests}
        assert len(delivery_ids) == 1  # a retry is the same event
        now = clock.now().timestamp()
        for request in receiver.requests:
            _signed(created.secret, request, now=now, tolerance=60)
    [delivery] = ledger.deliveries()
    assert delivery.proposal_id == proposal.proposal_id
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("delivered", 3, 200)
    assert delivery.delivered_at == clock.now()


def test_a_receiver_that_always_fails_ends_failed_and_the_cli_shows_it(
    sqlite_url: str, clock: ManualClock
) -> None:
    engine: Engine = create_ledger_engine(sqlite_url)
    ledger = ApprovalLedger(engine, clock)
    hostile = b"\x1b[31mboom <!channel>\r\nfake line"
    try:
        with webhook_receiver(statuses=[500] * 10, answer_body=hostile) as receiver:
            ledger.add_webhook(receiver.url)
            ledger.propose("send_email", SCHEMA, {"to": "a@b.c"}, owner="mailer")
            sender = WebhookSender(ledger, retry=RetryPolicy(max_attempts=4, base_seconds=1))
            states = []
            for _ in range(4):
                states += [(r.state, r.attempt) for r in sender.deliver_due()]
                clock.advance(60)
            assert sender.deliver_due() == []
            sender.close()
            assert len(receiver.requests) == 4
        assert states == [("pending", 1), ("pending", 2), ("pending", 3), ("failed", 4)]
    finally:
        ledger.close()
        engine.dispose()
    shown = run_cli("notify", "deliveries", "--failed", "--db", sqlite_url)
    assert shown.returncode == 0, shown.stderr
    [line] = shown.stdout.splitlines()
    assert "failed" in line and "attempts 4" in line and "status 500" in line
    assert "HTTP 500: \\u001b[31mboom <!channel>\\u000d\\u000afake line" in line
    assert "\x1b" not in shown.stdout
    as_json = json.loads(run_cli("notify", "deliveries", "--json", "--db", sqlite_url).stdout)
    [row] = as_json["deliveries"]
    assert (row["state"], row["attempts"], row["last_status"]) == ("failed", 4, 500)
    assert run_cli("notify", "deliveries", "--state", "delivered", "--db", sqlite_url
                   ).stdout.startswith("No deliveries")  # fmt: skip


def test_a_client_error_is_final_and_a_refused_connection_is_retried(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    with webhook_receiver(statuses=[404]) as receiver:
        ledger.add_webhook(receiver.url)
        unreachable = receiver.url  # the port closes when the block ends
    with webhook_receiver(statuses=[400]) as bad_request:
        ledger.add_webhook(bad_request.url)
        ledger.propose("send_email", SCHEMA, {"to": "a@b.c"})
        sender = WebhookSender(ledger, timeout=2)
        reports = {r.webhook_url: r for r in sender.deliver_due()}
        sender.close()
    assert unreachable
    states = sorted((r.state, r.status) for r in reports.values())
    assert states == [("failed", 400), ("pending", None)]
    refused = next(r for r in reports.values() if r.status is None)
    assert refused.error and "Connect" in refused.error


def test_a_proposal_decided_before_its_retry_is_not_announced_again(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    with webhook_receiver(statuses=[500]) as receiver:
        ledger.add_webhook(receiver.url)
        proposal = ledger.propose("send_email", SCHEMA, {"to": "a@b.c"})
        sender = WebhookSender(ledger)
        assert [r.state for r in sender.deliver_due()] == ["pending"]
        ledger.approve(proposal.proposal_id, "operator")
        clock.advance(600)
        [report] = sender.deliver_due()
        sender.close()
        assert len(receiver.requests) == 1
    assert report.state == "skipped" and "approved" in (report.error or "")


def test_slack_messages_escape_untrusted_text(ledger: ApprovalLedger) -> None:
    with webhook_receiver() as receiver:
        created = ledger.add_webhook(receiver.url, format="slack", base_url="https://sup.example")
        ledger.propose(
            "send_<!channel>", SCHEMA, {"note": "<https://evil.example|click> & <@U123>"},
            owner="<!here> agent", policy_reason="because <!everyone>",
        )  # fmt: skip
        sender = WebhookSender(ledger)
        sender.deliver_due()
        sender.close()
        [request] = receiver.requests
    message = _signed(created.secret, request, now=ledger.clock.now().timestamp())
    assert set(message) >= {"text", "blocks"}
    text = json.dumps(message)
    for raw in ("<!channel>", "<!here>", "<!everyone>", "<@U123>", "<https://evil"):
        assert raw not in text, raw
    assert "&lt;!channel&gt;" in message["text"] and "&lt;!here&gt;" in message["text"]
    section = message["blocks"][0]["text"]["text"]
    assert "&lt;https://evil.example|click&gt; &amp; &lt;@U123&gt;" in section
    assert "<https://sup.example/p/" in section  # the one link: ours


def test_tampered_or_replayed_requests_are_refused(ledger: ApprovalLedger) -> None:
    with webhook_receiver() as receiver:
        created = ledger.add_webhook(receiver.url)
        ledger.propose("send_email", SCHEMA, {"to": "a@b.c"})
        sender = WebhookSender(ledger)
        sender.deliver_due()
        sender.close()
        [request] = receiver.requests
    secret, now = created.secret, ledger.clock.now().timestamp()
    timestamp = request.headers["X-Supervisor-Timestamp"]
    header = request.headers["X-Supervisor-Signature"]
    verify_signature(secret, timestamp, request.body, header, now=now)
    tampered = request.body.replace(b"a@b.c", b"x@b.c")
    with pytest.raises(InvalidWebhookSignature, match="does not match"):
        verify_signature(secret, timestamp, tampered, header, now=now)
    with pytest.raises(InvalidWebhookSignature, match="does not match"):
        verify_signature(secret, str(int(timestamp) + 1), request.body, header, now=now)
    with pytest.raises(InvalidWebhookSignature, match="replayed or delayed"):
        verify_signature(secret, timestamp, request.body, header, now=now + 3600)
    with pytest.raises(InvalidWebhookSignature, match="does not match"):
        verify_signature("whsec_other", timestamp, request.body, header, now=now)


def test_the_cli_adds_tests_lists_and_removes_webhooks(sqlite_url: str) -> None:
    bad = run_cli("notify", "add", "webhook", "ftp://example.com/x", "--db", sqlite_url)
    assert_one_line_error(bad, "invalid_webhook_url")
    with webhook_receiver() as receiver:
        url = receiver.url.replace("http://", "http://user:hunter2secret@") + "?token=abc123"
        added = run_cli("notify", "add", "webhook", url, "--db", sqlite_url)
        assert added.returncode == 0, added.stderr
        assert "hunter2secret" not in added.stdout and "abc123" not in added.stdout
        webhook_id = added.stdout.split()[2]
        secret = added.stdout.split("signing secret", 1)[1].split()[0]
        tested = run_cli("notify", "test", webhook_id[:6], "--db", sqlite_url)
        assert tested.returncode == 0, tested.stderr
        [request] = receiver.requests
        event = _signed(secret, request)
        assert event["event"] == "webhook.test" and event["proposal"] is None
        assert request.headers["Authorization"].startswith("Basic ")  # credentials of the URL
        listed = run_cli("notify", "list", "--json", "--db", sqlite_url)
        assert secret not in listed.stdout and "hunter2secret" not in listed.stdout
        removed = run_cli("notify", "remove", webhook_id[:6], "--db", sqlite_url)
        assert removed.returncode == 0, removed.stderr
        again = run_cli("notify", "test", webhook_id, "--db", sqlite_url)
        assert_one_line_error(again, "webhook_not_found")
        missing = run_cli("notify", "remove", "ffffffff", "--db", sqlite_url)
        assert_one_line_error(missing, "webhook_not_found")
    assert json.loads(run_cli("notify", "list", "--json", "--db", sqlite_url).stdout) == {
        "webhooks": []}  # fmt: skip
    verified = run_cli("audit", "verify", "--db", sqlite_url)  # add and remove are audited
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_the_headless_sender_retries_until_delivered_and_stops_on_interrupt(
    system_ledger: ApprovalLedger, ledger_url: str
) -> None:
    ledger = system_ledger
    with webhook_receiver(statuses=[500, 502]) as receiver:
        created = ledger.add_webhook(receiver.url)
        assert SUPERVISOR is not None
        sender = subprocess.Popen(
            [SUPERVISOR, "notify", "run", "--poll", "0.1", "--retry-base", "0.2", "--db",
             ledger_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=os.environ.copy(),
        )  # fmt: skip
        try:
            proposal = ledger.propose("send_email", SCHEMA, {"api_key": API_KEY}, owner="m")
            deadline = time.monotonic() + 30
            while len(receiver.requests) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)  # a fourth POST would come now
        finally:
            sender.send_signal(signal.SIGINT)
            out, err = sender.communicate(timeout=30)
        assert sender.returncode == 0, (out, err)
        assert len(receiver.requests) == 3, out
    assert [line.split()[0] for line in out.splitlines()] == [
        "pending", "pending", "delivered", "Stopped."]  # fmt: skip
    assert "HTTP 500" in out and "retry at" in out and API_KEY not in out
    for request in receiver.requests:
        assert API_KEY not in request.body.decode()
        assert _signed(created.secret, request)["proposal"]["id"] == proposal.proposal_id
    [delivery] = ledger.deliveries()
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("delivered", 3, 200)


def test_a_sender_that_died_mid_attempt_leaves_the_delivery_to_another_once_its_claim_lapses(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    with webhook_receiver() as receiver:
        ledger.add_webhook(receiver.url)
        ledger.propose("send_email", SCHEMA, {"to": "a@b.c"})
        ledger.queue_blocked_deliveries()
        [taken] = ledger.claim_due_deliveries("dead-sender", claim_seconds=50)
        assert ledger.claim_due_deliveries("other", claim_seconds=50) == []  # claimed
        sender = WebhookSender(ledger)
        assert sender.deliver_due() == []  # the live claim keeps it
        clock.advance(51)
        [report] = sender.deliver_due()
        sender.close()
        assert (report.state, report.attempt) == ("delivered", 2)
        assert len(receiver.requests) == 1
        assert receiver.requests[0].headers["X-Supervisor-Delivery"] == taken.delivery_id
    # The dead sender's late result changes nothing: it no longer holds the claim.
    assert not ledger.finish_delivery_attempt(
        taken, "dead-sender", state="failed", status=None, error="late"
    )
    assert ledger.deliveries()[0].state == "delivered"
