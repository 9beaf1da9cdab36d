"""Ledger limits on a real SQLite file and real PostgreSQL: the extend cap, reserved names in
edits, and trace retention (which never drops a live proposal's evidence)."""

from __future__ import annotations

import math
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.cli import SUPERVISOR

from supervisor.ledger import ApproverContext, ManualClock, ProposalStatus, TraceEvent
from supervisor.ledger.errors import (
    ExtensionBeyondLimit,
    ExtensionNotFinite,
    ExtensionNotPositive,
    InvalidExtension,
    ReservedArgumentEdit,
)
from supervisor.ledger.retention import ExtendLimits, TraceRetention
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.approvals import ApprovalsService
from supervisor.services.edits import InvalidEdit, parse_edited_arguments
from supervisor.services.identity import ApproverIdentity
from supervisor.store.provider import SQLModelProvider

DAY = 24 * 3600


def _actions(ledger: ApprovalLedger) -> list[str]:
    return [record.action for record in ledger.events_since(0)]


# extend -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("seconds", "error", "code"),
    [
        (math.nan, ExtensionNotFinite, "extension_not_finite"),
        (math.inf, ExtensionNotFinite, "extension_not_finite"),
        (-math.inf, ExtensionNotFinite, "extension_not_finite"),
        (10**400, ExtensionNotFinite, "extension_not_finite"),
        ("60", ExtensionNotFinite, "extension_not_finite"),
        (True, ExtensionNotFinite, "extension_not_finite"),
        (-5, ExtensionNotPositive, "extension_not_positive"),
        (0, ExtensionNotPositive, "extension_not_positive"),
        (10**9, ExtensionBeyondLimit, "extension_beyond_limit"),  # 60 s -> about 2061
        (1e300, ExtensionBeyondLimit, "extension_beyond_limit"),
    ],
)
def test_extend_refuses_bad_or_unbounded_values_and_changes_nothing(
    ledger: ApprovalLedger, seconds: object, error: type[InvalidExtension], code: str
) -> None:
    proposal = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=60)
    with pytest.raises(error) as caught:
        ledger.extend(proposal.proposal_id, seconds, "alice")  # type: ignore[arg-type]
    assert caught.value.code == code
    assert isinstance(caught.value, ValueError)
    assert caught.value.to_dict()["details"]["proposal_id"] == proposal.proposal_id
    assert ledger.get(proposal.proposal_id) == proposal
    assert _actions(ledger) == ["propose"]


def test_extend_caps_the_total_lifetime_against_the_original_ttl(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    proposal = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=60)
    latest = proposal.created_at + timedelta(seconds=24 * 60)  # 24 x the original TTL
    ledger.approve(proposal.proposal_id, "alice")
    extended = ledger.extend(proposal.proposal_id, 24 * 60 - 60 - 100, "alice")
    clock.advance(30)
    with pytest.raises(ExtensionBeyondLimit) as caught:
        ledger.extend(proposal.proposal_id, 101, "alice")
    assert caught.value.max_expires_at == latest
    assert ledger.get(proposal.proposal_id).expires_at == extended.expires_at
    full = ledger.extend(proposal.proposal_id, 3600, "alice", up_to_limit=True)
    assert full.expires_at == latest
    with pytest.raises(ExtensionBeyondLimit):
        ledger.extend(proposal.proposal_id, 1, "alice", up_to_limit=True)
    assert _actions(ledger).count("extend") == 2


def test_extend_has_an_absolute_ceiling_and_is_configurable(ledger: ApprovalLedger) -> None:
    long_lived = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=DAY)
    ledger.extend(long_lived.proposal_id, 6 * DAY - 1, "alice")  # 7 days in all
    with pytest.raises(ExtensionBeyondLimit):
        ledger.extend(long_lived.proposal_id, 2, "alice")
    ledger.extend_limits = ExtendLimits(max_factor=2, max_lifetime_seconds=DAY)
    short = ledger.propose("tool", "s", {"a": 2}, ttl_seconds=60)
    assert ledger.extend(short.proposal_id, 60, "alice").expires_at == short.expires_at + (
        timedelta(seconds=60)
    )
    with pytest.raises(ExtensionBeyondLimit):
        ledger.extend(short.proposal_id, 1, "alice")


def test_the_supervisor_default_extend_stops_at_the_limit(ledger: ApprovalLedger) -> None:
    identity = ApproverIdentity(
        "tester@testhost#t1",
        "t1",
        ApproverContext(os_user="tester", host="testhost", pid=1, via="tui"),
    )
    service = ApprovalsService(ledger, identity)  # extend_seconds defaults to an hour
    proposal = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=60)
    extended = service.extend(proposal.proposal_id)
    assert extended.expires_at == proposal.created_at + timedelta(seconds=24 * 60)
    with pytest.raises(ExtensionBeyondLimit):
        service.extend(proposal.proposal_id)
    with pytest.raises(ExtensionNotFinite):
        service.extend(proposal.proposal_id, math.nan)


@pytest.mark.parametrize("seconds", [1e-7, 4e-7, 0.0009])
def test_an_extension_too_small_to_move_the_expiry_is_refused(
    ledger: ApprovalLedger, seconds: float
) -> None:
    # timedelta rounds 1e-7 s to nothing: an extend record with new expiry == old would make
    # the audit trail refuse every later claim of the proposal.
    proposal = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=60)
    ledger.approve(proposal.proposal_id, "alice")
    with pytest.raises(InvalidExtension) as caught:
        ledger.extend(proposal.proposal_id, seconds, "alice")
    assert caught.value.code == "extension_too_small"
    assert "0.001" in str(caught.value)
    assert ledger.get(proposal.proposal_id).expires_at == proposal.expires_at
    assert _actions(ledger) == ["propose", "approve"]
    ledger.claim(proposal.proposal_id, proposal.args_hash, "worker")


def test_up_to_limit_never_writes_a_sub_millisecond_extension(ledger: ApprovalLedger) -> None:
    proposal = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=60)
    ledger.extend(proposal.proposal_id, 24 * 60 - 60 - 0.0005, "alice")  # 0.5 ms left
    with pytest.raises(ExtensionBeyondLimit):
        ledger.extend(proposal.proposal_id, 1, "alice", up_to_limit=True)
    assert _actions(ledger).count("extend") == 1
    ledger.approve(proposal.proposal_id, "alice")
    ledger.claim(proposal.proposal_id, proposal.args_hash, "worker")


def test_an_edit_keeps_the_original_ttl_and_extend_cap(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    proposal = ledger.propose("tool", "s", {"a": 1}, ttl_seconds=60)
    clock.advance(30)
    edited = ledger.edit(proposal.proposal_id, {"a": 1}, "alice")  # not the 24 h default
    assert edited.expires_at - edited.created_at == timedelta(seconds=60)
    with pytest.raises(ExtensionBeyondLimit) as caught:
        ledger.extend(edited.proposal_id, 6 * DAY, "alice")
    assert caught.value.max_expires_at == edited.created_at + timedelta(seconds=24 * 60)
    # An explicit TTL is honoured, but the cap stays 24 x the first proposal's 60 s, also for
    # an edit of the edit (which inherits the TTL its predecessor was proposed with).
    explicit = ledger.edit(edited.proposal_id, {"a": 2}, "alice", ttl_seconds=600)
    assert explicit.expires_at - explicit.created_at == timedelta(seconds=600)
    clock.advance(5)
    again = ledger.edit(explicit.proposal_id, {"a": 3}, "alice")
    assert again.expires_at - again.created_at == timedelta(seconds=600)
    longest = ledger.extend(again.proposal_id, DAY, "alice", up_to_limit=True)
    assert longest.expires_at == again.created_at + timedelta(seconds=24 * 60)
    ledger.approve(again.proposal_id, "alice")
    ledger.claim(again.proposal_id, again.args_hash, "worker")
    assert ledger.verify().ok


# edit ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["approved", "_meta", "proposal_id", "Confirm"])
def test_edit_refuses_reserved_names_for_a_tool_without_a_schema(
    ledger: ApprovalLedger, name: str
) -> None:
    proposal = ledger.propose("mcp_files__delete", "no-registry-schema", {"path": "/tmp/x"})
    with pytest.raises(ReservedArgumentEdit) as caught:
        ledger.edit(proposal.proposal_id, {"path": "/tmp/x", name: True}, "alice")
    assert caught.value.code == "reserved_argument"
    assert caught.value.names == [name]
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
    assert _actions(ledger) == ["propose"]
    assert len(ledger.list().items) == 1
    with pytest.raises(InvalidEdit, match="reserved"):
        parse_edited_arguments(f'{{"path": "/tmp/x", "{name}": true}}', None)


# trace retention ----------------------------------------------------------------------------
def _events(at: datetime, thread_id: str, count: int) -> list[TraceEvent]:
    return [
        TraceEvent(at=at, agent_id="a", thread_id=thread_id, run_id=thread_id, kind="tool_call")
        for _ in range(count)
    ]


def _threads(ledger: ApprovalLedger) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in ledger.trace_events(limit=100_000):
        counts[event.thread_id or ""] = counts.get(event.thread_id or "", 0) + 1
    return counts


def test_retention_prunes_old_events_but_keeps_a_live_proposals_thread(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    start = clock.now()
    ledger.append_trace(_events(start, "t-old", 30))
    ledger.append_trace(_events(start, "t-pending", 4))
    ledger.append_trace(_events(start, "t-approved", 3))
    ledger.append_trace(_events(start, "t-rejected", 2))
    ledger.append_trace(_events(start + timedelta(days=20), "t-mid", 5))
    pending = ledger.propose("tool", "s", {"a": 1}, thread_id="t-pending", ttl_seconds=90 * DAY)
    approved = ledger.propose("tool", "s", {"a": 2}, thread_id="t-approved", ttl_seconds=90 * DAY)
    ledger.approve(approved.proposal_id, "alice")
    rejected = ledger.propose("tool", "s", {"a": 3}, thread_id="t-rejected")
    ledger.reject(rejected.proposal_id, "alice")
    clock.advance(40 * DAY)
    ledger.append_trace(_events(clock.now(), "t-new", 6))
    assert ledger.prune_traces() == 32
    assert _threads(ledger) == {"t-pending": 4, "t-approved": 3, "t-mid": 5, "t-new": 6}
    ledger.cancel(pending.proposal_id, "alice")
    assert ledger.prune_traces(TraceRetention(max_events=8)) == 7
    assert _threads(ledger) == {"t-approved": 3, "t-mid": 2, "t-new": 6}


def test_the_writer_prunes_on_a_cadence_to_the_count_cap(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    ledger.trace_retention = TraceRetention(max_age_seconds=None, max_events=10, prune_every=25)
    for batch in range(20):
        ledger.append_trace(_events(clock.now(), f"t-{batch}", 5))
    kept = ledger.trace_events(limit=1_000)
    assert [event.thread_id for event in kept] == ["t-18"] * 5 + ["t-19"] * 5


def test_traces_prune_cli(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    now = datetime.now(UTC)
    with SQLModelProvider(url) as provider:
        provider.ledger.append_trace(_events(now - timedelta(days=40), "t-old", 7))
        provider.ledger.append_trace(_events(now - timedelta(days=3), "t-recent", 2))
        provider.ledger.append_trace(_events(now, "t-now", 1))
    assert SUPERVISOR is not None

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SUPERVISOR, "traces", "prune", *args, "--db", url],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    assert run().stdout.strip() == "pruned 7 trace events"
    assert run("--older-than", "1d").stdout.strip() == "pruned 2 trace events"
    refused = run("--older-than", "soon")
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr and "--older-than" in refused.stderr
    with SQLModelProvider(url) as provider:
        assert [event.thread_id for event in provider.ledger.trace_events()] == ["t-now"]
