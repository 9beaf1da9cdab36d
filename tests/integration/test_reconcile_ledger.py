"""Recovery's liveness check and the reconcile transition, on SQLite and PostgreSQL.

Recovery reads the process table: a live pid whose process row's lease ran out (the pid was
reused) is dead, and so is an executor on another host whose row's lease ran out; one on
another host without a row is left alone. A reconcile is checked by the stored policy like an
approval, names who reconciled first to the loser, and ``verify`` replays it.
"""

from __future__ import annotations

import os
import pwd
import socket
from datetime import timedelta

import pytest

from supervisor.ledger import ManualClock, ProposalStatus
from supervisor.ledger.errors import (
    ApprovalAlreadyDecided,
    ApproverNotAllowed,
    InvalidReconcileOutcome,
    NotAwaitingReconciliation,
    SelfApprovalForbidden,
)
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.models import ExecutorIdentity, ProcessRecord, Proposal
from supervisor.ledger.policy import ApprovalPolicy
from supervisor.ledger.service import ApprovalLedger

HOST = socket.gethostname()
ME = pwd.getpwuid(os.getuid()).pw_name


def approved(ledger: ApprovalLedger, **options: object) -> Proposal:
    proposal = ledger.propose(
        "charge_card", "5" * 64, {"order": "A-1", "amount": 125}, owner="billing-agent",
        thread_id="t-1", **options,  # type: ignore[arg-type]
    )  # fmt: skip
    ledger.approve(proposal.proposal_id, "op")
    return proposal


def claimed(ledger: ApprovalLedger, pid: int, host: str = HOST, **options: object) -> Proposal:
    proposal = approved(ledger, **options)
    executor = ExecutorIdentity(executor_id="agent:billing-agent", pid=pid, host=host)
    ledger.claim(proposal.proposal_id, proposal.args_hash, executor)
    return proposal


def process_row(ledger: ApprovalLedger, pid: int, host: str = HOST) -> ProcessRecord:
    now = ledger.clock.now()
    return ledger.upsert_process(
        ProcessRecord(
            process_id=f"run-{pid}-{host}", kind="agent_run", pid=pid, host=host,
            status="running", started_at=now, heartbeat_at=now,
        )
    )  # fmt: skip


def flagged_ids(ledger: ApprovalLedger) -> list[str]:
    return [execution.proposal_id for execution in ledger.recover()]


def test_a_live_pid_whose_process_lease_expired_is_recovered(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    process_row(ledger, os.getpid())  # this very process: its pid is certainly running
    clock.advance(1)
    reused = claimed(ledger, os.getpid())
    assert ledger.recover() == []  # the lease holds: alive
    clock.advance(ledger.lease_seconds + 1)  # no heartbeat renewed it: its holder is gone
    assert flagged_ids(ledger) == [reused.proposal_id]
    assert ledger.get(reused.proposal_id).status is ProposalStatus.NEEDS_RECONCILIATION
    assert ledger.recover() == []  # flagged once, never re-run


def test_another_hosts_executor_is_judged_by_its_process_row(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    process_row(ledger, 4242, "host-b")
    clock.advance(1)
    with_row = claimed(ledger, 4242, "host-b")
    without_row = claimed(ledger, 4343, "host-c")
    assert ledger.recover() == []
    clock.advance(ledger.lease_seconds + 1)
    assert flagged_ids(ledger) == [with_row.proposal_id]
    assert ledger.get(without_row.proposal_id).status is ProposalStatus.EXECUTING


def test_reconcile_is_audited_and_names_the_first_reconciler(ledger: ApprovalLedger) -> None:
    proposal = claimed(ledger, 999_999, "gone-host")
    with pytest.raises(NotAwaitingReconciliation) as refused:
        ledger.reconcile(proposal.proposal_id, "executed", "alice", "checked")
    assert refused.value.status == "executing"
    ledger.recover(is_alive=lambda pid, host: False)
    with pytest.raises(InvalidReconcileOutcome):
        ledger.reconcile(proposal.proposal_id, "maybe", "alice", "?")  # type: ignore[arg-type]
    execution = ledger.reconcile(proposal.proposal_id, "failed", "alice", "no charge on file")
    assert execution.state == "failed" and execution.reason == "no charge on file"
    with pytest.raises(ApprovalAlreadyDecided) as lost:
        ledger.reconcile(proposal.proposal_id, "executed", "bob", "it ran")
    assert lost.value.by == "alice" and lost.value.status == "failed"
    found = ledger.reconciliation(proposal.proposal_id)
    assert found is not None and found.outcome == "failed" and found.reconciled_by == "alice"
    assert found.flagged_reason is not None and "stopped before recording" in found.flagged_reason
    [record] = [r for r in ledger.events_since(0) if r.action == "reconcile"]
    assert record.payload["identity"] == str(EnvironmentIdentity.current())
    assert record.payload["domains"] == [] and record.payload["from"] == "needs_reconciliation"
    report = ledger.verify()
    assert report.ok, report.mismatches


def test_reconcile_follows_the_self_approval_rule(ledger: ApprovalLedger) -> None:
    own = claimed(ledger, 999_999, "gone-host", user=ME)  # approved before the rule existed
    ledger.recover(is_alive=lambda pid, host: False)
    ledger.apply_policy(ApprovalPolicy(forbid_self_approval=True))
    with pytest.raises(SelfApprovalForbidden):
        ledger.reconcile(own.proposal_id, "executed", "me", "I checked my own charge")
    assert ledger.get(own.proposal_id).status is ProposalStatus.NEEDS_RECONCILIATION
    ledger.apply_policy(ApprovalPolicy())
    ledger.reconcile(own.proposal_id, "executed", "me", "checked")
    assert ledger.verify().ok


@pytest.fixture
def payments_claimed(ledger: ApprovalLedger) -> tuple[ApprovalLedger, Proposal]:
    proposal = claimed(ledger, 999_999, "gone-host", domains=["payments"])
    ledger.recover(is_alive=lambda pid, host: False)
    ledger.apply_policy(ApprovalPolicy(approvers_by_domain={"payments": ["cfo"]}))
    return ledger, proposal


def test_reconcile_is_refused_outside_the_domains_approvers(
    payments_claimed: tuple[ApprovalLedger, Proposal],
) -> None:
    ledger, proposal = payments_claimed
    with pytest.raises(ApproverNotAllowed):
        ledger.reconcile(proposal.proposal_id, "executed", "me", "checked")
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.NEEDS_RECONCILIATION
    ledger.apply_policy(ApprovalPolicy(approvers_by_domain={"payments": [ME]}))
    ledger.reconcile(proposal.proposal_id, "executed", "me", "checked")
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.EXECUTED
    assert ledger.verify().ok


def test_a_reconcile_record_checked_against_other_domains_is_found(
    ledger: ApprovalLedger, clock: ManualClock
) -> None:
    proposal = claimed(ledger, 999_999, "gone-host", domains=["payments"])
    ledger.recover(is_alive=lambda pid, host: False)
    with ledger.repository.write() as tx:  # a finding forged past the policy: no domains
        tx.append_audit(
            at=clock.now() + timedelta(seconds=1), actor="mallory", action="reconcile",
            subject=proposal.proposal_id,
            payload={"outcome": "executed", "domains": [], "user": None},
        )  # fmt: skip
        tx.update_proposal(
            proposal.proposal_id, expect_status=ProposalStatus.NEEDS_RECONCILIATION,
            values={"status": ProposalStatus.EXECUTED},
        )  # fmt: skip
        tx.update_execution(
            proposal.proposal_id, expect_state="needs_reconciliation", state="executed"
        )
    report = ledger.verify()
    assert not report.ok
    assert any("another domains than proposed" in str(m) for m in report.mismatches), report
