"""Headless service tests: no event loop, a real SQLite ledger."""

from __future__ import annotations

import time

import pytest
from tui_helpers import propose

from supervisor.ledger.errors import (
    ApprovalAlreadyDecided,
    ApproverNotAllowed,
    SelfApprovalForbidden,
)
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.models import ProposalStatus, TraceEvent
from supervisor.ledger.policy import ApprovalPolicy
from supervisor.services.approvals import ApprovalsService, InboxChange
from supervisor.services.edits import InvalidEdit, parse_edited_arguments
from supervisor.services.guard import RenderGuardMissing
from supervisor.services.identity import ApproverIdentity
from supervisor.services.rendering import render_arguments, visible_escapes
from supervisor.services.review.index import ReviewIndex
from supervisor.services.review.rows import ReviewFilter, ReviewRow
from supervisor.services.settings import SupervisorSettings
from supervisor.services.traces import TracesService
from supervisor.store.provider import SQLModelProvider


def test_bidi_and_control_characters_are_shown_as_escapes() -> None:
    lines = render_arguments({"file": "invoice\u202egpj.exe", "note": "a\u200bb\x7f\u2028"})
    text = "\n".join(lines)
    assert "\\u202e" in text and "\\u200b" in text and "\\u007f" in text and "\\u2028" in text
    assert "\u202e" not in text
    assert visible_escapes("plain") == "plain"


def test_approve_is_refused_without_a_rendered_guard(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    proposal = propose(provider.ledger)
    service = ApprovalsService(provider.ledger, identity)
    with pytest.raises(RenderGuardMissing):
        service.approve(proposal.proposal_id, None)
    with pytest.raises(RenderGuardMissing):
        service.confirm_rendered(proposal, render_arguments(proposal.arguments)[:-1])
    assert provider.ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
    guard = service.confirm_rendered(proposal, render_arguments(proposal.arguments))
    approved = service.approve(proposal.proposal_id, guard)
    assert approved.status is ProposalStatus.APPROVED
    assert approved.approver_id == identity.approver_id


def test_a_guard_for_other_arguments_does_not_approve(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    first = propose(provider.ledger, arguments={"name": "Ada"})
    second = propose(provider.ledger, arguments={"name": "Eve"})
    service = ApprovalsService(provider.ledger, identity)
    service.load()
    guard = service.confirm_rendered(first, render_arguments(first.arguments))
    with pytest.raises(RenderGuardMissing):
        service.approve(second.proposal_id, guard)


def test_feed_updates_the_pending_set_and_reports_decisions(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    service = ApprovalsService(provider.ledger, identity, SupervisorSettings(poll_timeout=0.05))
    changes: list[InboxChange] = []
    service.subscribe(changes.append)
    service.load()
    proposal = propose(provider.ledger)
    while service.poll(0.5) is not None and not service.pending():
        pass
    assert [p.proposal_id for p in service.pending()] == [proposal.proposal_id]
    provider.ledger.reject(proposal.proposal_id, "bob@host", "no")
    service.poll(0.5)
    assert service.pending() == []
    assert changes[-1].removed == (proposal.proposal_id,)
    assert changes[-1].decisions[-1].actor == "bob@host"
    assert [r.action for r in service.history(proposal.proposal_id)] == ["propose", "reject"]
    service.unsubscribe(changes.append)


def test_a_stream_of_changes_reaches_the_inbox_in_batches(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    """The feed thread pauses ``inbox_interval`` after each change it publishes, so a ledger
    changing 100 times a second redraws the inbox a few times a second, and nothing is lost."""
    settings = SupervisorSettings(poll_timeout=0.05, inbox_interval=0.25)
    service = ApprovalsService(provider.ledger, identity, settings)
    changes: list[InboxChange] = []
    service.subscribe(changes.append)
    service.start()
    try:
        deadline = time.monotonic() + 10
        while not service.loaded and time.monotonic() < deadline:
            time.sleep(0.01)
        published = len(changes)
        started = time.monotonic()
        made = []
        for n in range(40):
            made.append(propose(provider.ledger, arguments={"name": f"n{n}"}))
            time.sleep(0.01)
        while len(service.pending()) < 40 and time.monotonic() < deadline:
            time.sleep(0.01)
        elapsed = time.monotonic() - started
    finally:
        service.stop()
    assert {p.proposal_id for p in service.pending()} == {p.proposal_id for p in made}
    # At most one change per interval, plus the first (shown at once): never one per proposal.
    assert len(changes) - published <= elapsed / settings.inbox_interval + 1
    assert len(changes) - published < 40


def test_the_feed_starts_where_the_inbox_was_read_and_history_still_goes_back(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    decided = propose(provider.ledger)
    provider.ledger.reject(decided.proposal_id, "bob@host", "no")
    waiting = propose(provider.ledger)
    service = ApprovalsService(provider.ledger, identity, SupervisorSettings(poll_timeout=0.05))
    changes: list[InboxChange] = []
    service.subscribe(changes.append)
    service.load()
    assert [p.proposal_id for p in service.pending()] == [waiting.proposal_id]
    published = len(changes)
    # Nothing happened since the load: the records written before it are not replayed.
    assert service.poll(0.05) is None
    assert len(changes) == published
    # Yet the detail's history of a proposal decided before this console started is whole.
    assert [r.action for r in service.history(decided.proposal_id)] == ["propose", "reject"]
    assert [r.action for r in service.history(waiting.proposal_id)] == ["propose"]
    service.unsubscribe(changes.append)


def test_losing_a_race_names_the_winner(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    proposal = propose(provider.ledger)
    service = ApprovalsService(provider.ledger, identity)
    guard = service.confirm_rendered(proposal, render_arguments(proposal.arguments))
    provider.ledger.approve(proposal.proposal_id, "alice@elsewhere")
    with pytest.raises(ApprovalAlreadyDecided) as raised:
        service.approve(proposal.proposal_id, guard)
    assert raised.value.by == "alice@elsewhere"


def test_edit_validates_against_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"qty": {"type": "integer"}},
        "required": ["qty"],
        "additionalProperties": False,
    }
    assert parse_edited_arguments('{"qty": 3}', schema) == {"qty": 3}
    with pytest.raises(InvalidEdit, match="qty"):
        parse_edited_arguments('{"qty": "3"}', schema)
    with pytest.raises(InvalidEdit, match="JSON object"):
        parse_edited_arguments("[]", None)
    with pytest.raises(InvalidEdit, match="Not valid JSON"):
        parse_edited_arguments("{", None)


def test_trace_service_starts_at_the_tail_and_stays_bounded(provider: SQLModelProvider) -> None:
    now = provider.ledger.clock.now()
    events = [TraceEvent(at=now, agent_id="a", kind="tool_result", tool=f"t{i}") for i in range(50)]
    provider.ledger.append_trace(events)
    service = TracesService(provider.ledger, SupervisorSettings(trace_capacity=10))
    service.poll()
    assert [event.tool for event in service.events()] == [f"t{i}" for i in range(40, 50)]
    provider.ledger.append_trace([TraceEvent(at=now, agent_id="a", kind="run", tool="new")])
    batch = service.poll()
    assert batch is not None and batch.dropped == 1
    assert service.events()[-1].tool == "new" and len(service.events()) == 10


def test_review_filters_and_stats() -> None:
    index = ReviewIndex()
    now = TraceEvent(at=__import__("datetime").datetime(2030, 1, 1), kind="x").at
    rows = [
        ReviewRow.from_event(
            TraceEvent(
                at=now,
                agent_id=f"agent-{i % 2}",
                kind="tool_result",
                tool="lookup",
                outcome_status="success" if i % 3 else "error",
                payload={"i": i},
            )
        )
        for i in range(12)
    ]
    index.add(rows)
    assert len(index.select(ReviewFilter(agent="agent-1"))) == 6
    assert len(index.select(ReviewFilter(status="error"))) == 4
    assert len(index.select(ReviewFilter(text='"i": 11'))) == 1
    assert index.tools["lookup"].usable_ratio == pytest.approx(8 / 12)


def test_the_supervisor_decides_under_the_ledgers_policy_as_its_os_user(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    # The identity's label and context say "tester"; the ledger matches the process's OS user.
    me = EnvironmentIdentity.current().user
    provider.ledger.apply_policy(
        ApprovalPolicy(forbid_self_approval=True, approvers_by_domain={"payments": ["tester"]})
    )
    service = ApprovalsService(provider.ledger, identity)
    mine = propose(provider.ledger, user=me)
    paying = propose(provider.ledger, user="tester", domains=("payments",))
    for proposal, error in ((mine, SelfApprovalForbidden), (paying, ApproverNotAllowed)):
        guard = service.confirm_rendered(proposal, render_arguments(proposal.arguments))
        with pytest.raises(error):
            service.approve(proposal.proposal_id, guard)
        assert provider.ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING


def test_the_console_sweeps_proposals_whose_time_ran_out(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    """Nobody else sweeps (the agent that waited is gone): the console does, once a proposal
    in its inbox is past its expiry, and the feed then drops it from the inbox."""
    short = propose(provider.ledger, arguments={"n": 1}, ttl_seconds=0.3)
    long = propose(provider.ledger, arguments={"n": 2})
    service = ApprovalsService(provider.ledger, identity)
    service.load()
    assert service.sweep_expired() == []  # nothing due yet: no write at all
    head = provider.ledger.head()
    time.sleep(0.4)
    assert service.sweep_expired() == [short.proposal_id]
    change = service.poll(2.0)
    assert change is not None and change.removed == (short.proposal_id,)
    assert [p.proposal_id for p in service.pending()] == [long.proposal_id]
    assert [(r.action, r.actor) for r in provider.ledger.events_since(head)] == [
        ("expire", "ledger")
    ]
    assert service.sweep_expired() == []
