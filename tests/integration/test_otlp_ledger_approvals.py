"""Approval spans from ledger facts the run test does not reach: a pending call, an approval that
expired before anything claimed it, an edit, calls no run event names (their own trace), a
secret in a reason, and the facts read never holding the arguments."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from support.otlp import Span, decode_json, spans_of

from supervisor.analysis.approvals import ApprovalFacts, Vote, iter_approval_facts
from supervisor.analysis.otlp import otlp_document
from supervisor.ledger.clock import ManualClock
from supervisor.ledger.models import TraceEvent
from supervisor.store.provider import SQLModelProvider

T0 = datetime(2030, 1, 1, tzinfo=UTC)
SECRET = "sk-live1234567890abcdef"


def _spans(document: dict[str, object]) -> list[Span]:
    return spans_of(decode_json(json.dumps(document)))


def _approvals(spans: list[Span]) -> dict[str, Span]:
    return {str(span.attributes["supervisor.proposal.id"]): span for span in spans
            if span.name.startswith("approval ")}  # fmt: skip


def test_pending_expired_edited_and_unnamed_proposals(sqlite_url: str) -> None:
    clock = ManualClock(T0)
    with SQLModelProvider(sqlite_url, clock=clock) as provider:
        ledger = provider.ledger
        run_event = dict(agent_id="ops", thread_id="t1", run_id="r1")
        pending = ledger.propose("send", "h" * 64, {"to": "x@example.com"}, owner="ops",
                                 thread_id="t1", call_id="c-pending", ttl_seconds=600)  # fmt: skip
        stale = ledger.propose("send", "h" * 64, {"to": "y@example.com"}, owner="ops",
                               thread_id="t1", call_id="c-stale", ttl_seconds=30)  # fmt: skip
        edited = ledger.propose("send", "h" * 64, {"to": "z@example.com"}, owner="ops",
                                thread_id="t1", call_id="c-edit", ttl_seconds=600)  # fmt: skip
        gate = ledger.propose("mcp__delete", "h" * 64, {"id": 7}, owner="gate", ttl_seconds=600)
        ledger.append_trace([
            TraceEvent(at=T0, kind="tool_call", tool="send", payload={"call_id": "c-pending"},
                       **run_event),
            TraceEvent(at=T0, kind="approval", tool="send", outcome_status="pending",
                       payload={"proposal_id": stale.proposal_id}, **run_event),
            TraceEvent(at=T0, kind="approval", tool="send", outcome_status="pending",
                       payload={"proposal_id": edited.proposal_id}, **run_event),
        ])  # fmt: skip
        clock.advance(10)
        ledger.approve(stale.proposal_id, "op", f"fine, token {SECRET}")
        replacement = ledger.edit(edited.proposal_id, {"to": "ok@example.com"}, "op", "typo")
        ledger.reject(gate.proposal_id, "op", "no deletes")
        clock.advance(50)  # the stale approval expired unclaimed at T0 + 30
        document = otlp_document(ledger.trace_events(limit=100), iter_approval_facts(ledger),
                                 now=clock.now())  # fmt: skip
    text = json.dumps(document)
    assert SECRET not in text and "[REDACTED]" in text
    assert "@example.com" not in text  # no argument value, only hashes
    spans = _spans(document)
    approvals = _approvals(spans)
    roots = {span.span_id: span for span in spans if not span.parent}
    run_root = next(root for root in roots.values() if root.attributes.get("supervisor.run.id"))

    waiting = approvals[pending.proposal_id]  # joined to the run by its call id
    assert waiting.parent == run_root.span_id
    assert waiting.attributes["supervisor.approval.decision"] == "pending"
    assert "supervisor.approval.decided_by" not in waiting.attributes
    assert waiting.attributes["supervisor.approval.wait_ms"] == 60_000  # until the export
    assert waiting.status == 0 and [name for name, _, _ in waiting.events] == ["proposed"]

    expired = approvals[stale.proposal_id]
    assert expired.attributes["supervisor.approval.decision"] == "expired"
    assert expired.attributes["supervisor.approval.decided_by"] == "op"  # who had approved it
    assert expired.attributes["supervisor.approval.wait_ms"] == 30_000
    assert [name for name, _, _ in expired.events] == ["proposed", "approved", "expired"]
    assert expired.message == "expired: the call did not run"

    old, new = approvals[edited.proposal_id], approvals[replacement.proposal_id]
    assert old.attributes["supervisor.approval.decision"] == "superseded"
    assert old.attributes["supervisor.proposal.superseded_by"] == replacement.proposal_id
    assert new.attributes["supervisor.proposal.supersedes"] == edited.proposal_id
    assert new.parent == old.parent == run_root.span_id  # the edit follows its call's trace

    refused = approvals[gate.proposal_id]  # no run names it: a trace of its own agent
    gate_root = roots[refused.parent]
    assert gate_root.name == "invoke_agent gate" and gate_root.trace_id != run_root.trace_id
    assert refused.attributes["supervisor.approval.decision"] == "rejected"
    assert gate_root.start <= refused.start and gate_root.end >= refused.end


def test_quorum_votes_are_span_events_and_counts() -> None:
    facts = ApprovalFacts(
        proposal_id="p1", tool_name="wire", call_id="c1", owner="ops", args_hash="a" * 64,
        status="executed", created_at=T0, decided_at=T0 + timedelta(minutes=3),
        expires_at=T0 + timedelta(hours=1), approver_id="bob", decided_by="bob",
        approvals_required=2, claimed_at=T0 + timedelta(minutes=4),
        votes=(Vote(identity="alice@host-a", approver_id="alice", at=T0 + timedelta(minutes=1)),
               Vote(identity="bob@host-b", approver_id="bob", at=T0 + timedelta(minutes=3))),
    )  # fmt: skip
    events = [TraceEvent(at=T0, run_id="r", agent_id="ops", kind="tool_call", tool="wire",
                         payload={"call_id": "c1"}),
              TraceEvent(at=T0 + timedelta(minutes=5), run_id="r", agent_id="ops",
                         kind="tool_result", tool="wire", outcome_status="success",
                         payload={"call_id": "c1", "proposal_id": "p1"})]  # fmt: skip
    spans = _spans(otlp_document(events, [facts], now=T0 + timedelta(hours=2)))
    approval = next(span for span in spans if span.name == "approval wire")
    assert approval.attributes["supervisor.approval.approvals_required"] == 2
    assert approval.attributes["supervisor.approval.approvals"] == 2
    votes = [attributes for name, _, attributes in approval.events if name == "vote"]
    assert [vote["supervisor.approval.identity"] for vote in votes] == [
        "alice@host-a", "bob@host-b"
    ]  # fmt: skip
    tool = next(span for span in spans if span.name == "execute_tool wire")
    assert tool.duration_ms == 60_000  # from the claim, not from the model's call
    assert tool.links == [approval.span_id]
