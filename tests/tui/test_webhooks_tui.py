"""The TUI sends webhook events too: a proposal that reaches the inbox is POSTed (signed) from
the dispatcher's thread, and a delivery that fails for good is said in a toast."""

from __future__ import annotations

import json

from support.webhook_receiver import webhook_receiver
from tui_helpers import main_screen, propose, record_notifications, wait_for

from screens.app import make_app
from supervisor.services.identity import ApproverIdentity
from supervisor.services.settings import SupervisorSettings
from supervisor.services.webhook_signing import verify_request
from supervisor.store.provider import SQLModelProvider

SIZE = (150, 45)


async def test_a_new_blocked_proposal_is_posted_from_the_tui(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    with webhook_receiver() as receiver:
        created = provider.ledger.add_webhook(receiver.url)
        app = make_app(settings, ledger=provider.ledger, identity=identity)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_for(pilot, lambda: screen.webhooks is not None)
            proposal = propose(provider.ledger, arguments={"name": "Ada", "password": "s3cr3t-pw"})
            await wait_for(pilot, lambda: len(receiver.requests) == 1, limit=10)
        [request] = receiver.requests
    event = verify_request(created.secret, request.headers, request.body)
    assert event["proposal"]["id"] == proposal.proposal_id
    assert "s3cr3t-pw" not in request.body.decode()
    assert json.loads(request.body)["proposal"]["tool"] == "create_customer"


async def test_a_delivery_that_fails_for_good_is_shown(
    provider: SQLModelProvider, settings: SupervisorSettings, identity: ApproverIdentity
) -> None:
    with webhook_receiver(statuses=[410]) as receiver:
        provider.ledger.add_webhook(receiver.url)
        app = make_app(settings, ledger=provider.ledger, identity=identity)
        async with app.run_test(size=SIZE) as pilot:
            notes = record_notifications(app)
            await wait_for(pilot, lambda: main_screen(app).webhooks is not None)
            propose(provider.ledger)
            await wait_for(pilot, lambda: any("HTTP 410" in note for note in notes), limit=10)
    [failed] = provider.ledger.deliveries(states=["failed"])
    assert failed.last_status == 410
