"""Every field the audit chain records is bound: policy rows, proposal fields, execution outcomes.

Each attack is plain SQL on the same database (``support.tamper``), what any process that can
write the ledger can do. The decision or the claim must refuse and ``verify`` must name what was
changed; honest ledgers still verify.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from support.tamper import checks, refused_claim, sql, timestamp

from supervisor.canonical import canonical_json
from supervisor.ledger import ArgumentsMismatch, AuditMismatch, ManualClock, ProposalStatus
from supervisor.ledger.errors import ApproverNotAllowed, PolicyInvalid, SelfApprovalForbidden
from supervisor.ledger.policy import ApprovalPolicy
from supervisor.ledger.service import ApprovalLedger
from supervisor.ledger.verify import LedgerReport

ME = pwd.getpwuid(os.getuid()).pw_name
CFO_ONLY = ApprovalPolicy(forbid_self_approval=True, approvers_by_domain={"finance": ["cfo"]})
PAYMENT = {"amount": 10, "to": "alice"}


@pytest.fixture
def attacker(ledger_url: str, ledger: ApprovalLedger) -> Iterator[Engine]:
    """A plain SQLAlchemy engine on the same database: no ledger code, just SQL."""
    engine = sa.create_engine(ledger_url)
    try:
        yield engine
    finally:
        engine.dispose()


def _policy_findings(report: LedgerReport) -> list[tuple[str, str]]:
    return sorted((f.proposal_id, f.detail) for f in report.mismatches if f.check == "policy")


# 1. policy rows are explained by their policy_apply records ------------------------------


def test_a_policy_row_inserted_without_its_audit_record_grants_nothing(
    ledger: ApprovalLedger, attacker: Engine, clock: ManualClock
) -> None:
    ledger.apply_policy(CFO_ONLY, reason="cfo signs finance")
    paying = ledger.propose("pay", "s", PAYMENT, domains=["finance"], user="bob")
    with pytest.raises(ApproverNotAllowed):
        ledger.approve(paying.proposal_id, "op")
    # A loosened v2 with a correct document hash, a forged applier and someone else's seq.
    loose = ApprovalPolicy()
    sql(
        attacker,
        "INSERT INTO policy_version (version, document_json, document_hash, applied_by, "
        "applied_at, reason, audit_seq) VALUES (2, :doc, :hash, 'cfo@vm', :at, 'x', 2)",
        doc=loose.document_json(), hash=loose.document_hash, at=timestamp(attacker, clock.now()),
    )  # fmt: skip
    with pytest.raises(PolicyInvalid) as caught:
        ledger.approve(paying.proposal_id, "op")
    assert caught.value.code == "policy_invalid"
    assert "v2" in str(caught.value) and "audit record" in str(caught.value)
    assert ledger.get(paying.proposal_id).status is ProposalStatus.PENDING
    assert not [r for r in ledger.events_since(0) if r.action == "approve"]
    assert ledger.reject(paying.proposal_id, "op").status is ProposalStatus.REJECTED
    report = ledger.verify()
    assert report.chain_ok and not report.ok and report.policy_versions_checked == 2
    assert _policy_findings(report) == [
        ("policy v2", "row: a policy row that no policy_apply audit record applied")
    ]


def test_a_policy_row_rewritten_consistently_grants_nothing(
    ledger: ApprovalLedger, attacker: Engine
) -> None:
    ledger.apply_policy(CFO_ONLY)
    paying = ledger.propose("pay", "s", PAYMENT, domains=["finance"])
    loose = ApprovalPolicy()
    sql(
        attacker,
        "UPDATE policy_version SET document_json = :doc, document_hash = :hash, "
        "applied_by = 'cfo@vm'",
        doc=loose.document_json(), hash=loose.document_hash,
    )  # fmt: skip
    with pytest.raises(PolicyInvalid, match="not the one its policy_apply audit record"):
        ledger.approve(paying.proposal_id, "op")
    report = ledger.verify()
    fields = {f.detail.split(":")[0] for f in report.mismatches if f.proposal_id == "policy v1"}
    assert fields == {"document_hash", "document", "applied_by"}


def test_a_deleted_policy_row_grants_nothing(ledger: ApprovalLedger, attacker: Engine) -> None:
    ledger.apply_policy(ApprovalPolicy(approvers_by_domain={"finance": [ME]}))
    ledger.apply_policy(CFO_ONLY, reason="only the cfo now")
    paying = ledger.propose("pay", "s", PAYMENT, domains=["finance"])
    sql(attacker, "DELETE FROM policy_version WHERE version = 2")  # back to the looser v1
    with pytest.raises(PolicyInvalid, match="applied v2, not this version"):
        ledger.approve(paying.proposal_id, "op")
    assert _policy_findings(ledger.verify()) == [
        ("policy v2", "row: the audit chain applied this version but its policy row is gone")
    ]
    sql(attacker, "DELETE FROM policy_version")  # no policy at all
    with pytest.raises(PolicyInvalid, match="no policy row"):
        ledger.approve(paying.proposal_id, "op")
    assert ledger.get(paying.proposal_id).status is ProposalStatus.PENDING


def test_honest_policy_versions_verify(ledger: ApprovalLedger) -> None:
    for policy in (CFO_ONLY, ApprovalPolicy(), ApprovalPolicy(forbid_self_approval=True)):
        ledger.apply_policy(policy, reason="change")
    mine = ledger.propose("pay", "s", PAYMENT, domains=["finance"], user="bob")
    ledger.approve(mine.proposal_id, "op")
    report = ledger.verify()
    assert report.ok, report.mismatches
    assert report.policy_versions_checked == 3


# 2. proposal fields are bound to the propose record ----------------------------------------

# (column, value) rewrites of an approved proposal, each named by verify as ``check``.
_ROW_REWRITES = {
    "supersedes_id": ("supersedes_id", "0" * 32),
    "owner": ("owner", "evil-agent"),
    "user": ("user_id", "mallory"),
    "thread_id": ("thread_id", "other-thread"),
    "risk": ("risk", "low"),
    "domains": ("domains_json", "[]"),
}


@pytest.mark.parametrize("check", sorted(_ROW_REWRITES))
def test_a_rewritten_proposal_field_never_runs(
    ledger: ApprovalLedger, attacker: Engine, check: str
) -> None:
    proposal = ledger.propose(
        "pay", "s", PAYMENT, owner="pay-agent", user="bob", thread_id="t1",
        domains=["finance"], risk="high",
    )  # fmt: skip
    ledger.approve(proposal.proposal_id, "op")
    column, value = _ROW_REWRITES[check]
    sql(attacker, f"UPDATE proposal SET {column} = :v WHERE id = :id", v=value,
        id=proposal.proposal_id)  # fmt: skip
    if check == "domains":
        sql(attacker, "DELETE FROM proposal_domain")
    error = refused_claim(ledger, proposal.proposal_id, proposal.args_hash)
    assert check in error.detail
    report = ledger.verify()
    assert report.chain_ok and not report.ok
    assert checks(report, proposal.proposal_id) == {check}


def test_a_rewritten_target_is_named(ledger: ApprovalLedger, attacker: Engine) -> None:
    proposal = ledger.propose("pay", "s", PAYMENT, execution_target={"bank": "a"})
    ledger.approve(proposal.proposal_id, "op")
    sql(attacker, "UPDATE proposal SET target_json = :t",
        t=canonical_json({"bank": "evil"}))  # fmt: skip
    with pytest.raises(ArgumentsMismatch):  # the target is part of the args hash
        ledger.claim(proposal.proposal_id, proposal.args_hash, "worker")
    assert checks(ledger.verify(), proposal.proposal_id) == {"arguments", "target"}


@pytest.mark.parametrize(
    ("column", "stripped", "proposed", "error"),
    [
        ("domains_json", "[]", {"domains": ["finance"], "user": "bob"}, ApproverNotAllowed),
        ("user_id", None, {"user": ME}, SelfApprovalForbidden),
    ],
)
def test_a_row_rewritten_to_pass_the_policy_and_restored_never_runs(
    ledger: ApprovalLedger,
    attacker: Engine,
    column: str,
    stripped: str | None,
    proposed: dict[str, Any],
    error: type[Exception],
) -> None:
    ledger.apply_policy(CFO_ONLY)
    proposal = ledger.propose("pay", "s", PAYMENT, **proposed)
    with pytest.raises(error):
        ledger.approve(proposal.proposal_id, "op")
    with attacker.connect() as connection:
        original = connection.execute(sa.text(f"SELECT {column} FROM proposal")).scalar_one()
    # Strip what the policy looks at, approve, and put it back before the claim.
    sql(attacker, f"UPDATE proposal SET {column} = :v", v=stripped)
    ledger.approve(proposal.proposal_id, "op")
    sql(attacker, f"UPDATE proposal SET {column} = :v", v=original)
    assert ledger.get(proposal.proposal_id).model_dump(exclude={"status", "updated_at",
        "decided_at", "approver_id", "approver_context", "decision_reason"}) == (
        proposal.model_dump(exclude={"status", "updated_at", "decided_at", "approver_id",
                                     "approver_context", "decision_reason"})
    )  # fmt: skip
    detail = refused_claim(ledger, proposal.proposal_id, proposal.args_hash).detail
    assert "the policy was checked against another" in detail
    # The fold refuses that approve: the chain says pending, the row approved.
    assert checks(ledger.verify(), proposal.proposal_id) == {"chain", "status", "approver"}


def test_an_edit_never_copies_a_rewritten_row(ledger: ApprovalLedger, attacker: Engine) -> None:
    ledger.apply_policy(ApprovalPolicy(approvers_by_domain={"finance": [ME]}))
    proposal = ledger.propose("pay", "s", PAYMENT, domains=["finance"], user="bob")
    sql(attacker, "UPDATE proposal SET domains_json = '[]', user_id = 'mallory'")
    head = ledger.head()
    with pytest.raises(AuditMismatch, match="its user is 'mallory', not the proposed 'bob'"):
        ledger.edit(proposal.proposal_id, {**PAYMENT, "amount": 5}, "op")
    assert ledger.head() == head
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING


# 2. execution rows are bound to claim / complete / fail ------------------------------------


@pytest.mark.parametrize(
    ("assignment", "check"),
    [
        ("result_ref = 'blob:forged'", "result_ref"),
        ("outcome_status = 'error'", "outcome_status"),
        ("executor_id = 'mallory'", "executor"),
        ("executor_pid = 1", "executor"),
    ],
)
def test_a_rewritten_execution_outcome_is_named(
    ledger: ApprovalLedger, attacker: Engine, assignment: str, check: str
) -> None:
    proposal = ledger.propose("pay", "s", PAYMENT)
    ledger.approve(proposal.proposal_id, "op")
    ledger.claim(proposal.proposal_id, proposal.args_hash, "agent:x")
    ledger.complete(proposal.proposal_id, "success", "blob:good", executor="agent:x")
    assert ledger.verify().ok
    sql(attacker, f"UPDATE execution SET {assignment}")
    report = ledger.verify()
    assert not report.ok
    assert checks(report, proposal.proposal_id) == {check}


def test_an_outcome_set_before_completion_is_named(
    ledger: ApprovalLedger, attacker: Engine
) -> None:
    proposal = ledger.propose("pay", "s", PAYMENT)
    ledger.approve(proposal.proposal_id, "op")
    ledger.claim(proposal.proposal_id, proposal.args_hash, "agent:x")
    sql(attacker, "UPDATE execution SET outcome_status = 'success', result_ref = 'blob:x'")
    assert checks(ledger.verify(), proposal.proposal_id) == {"outcome_status", "result_ref"}


def test_honest_fields_verify_on_every_path(ledger: ApprovalLedger) -> None:
    options: dict[str, Any] = {
        "owner": "a", "user": "bob", "thread_id": "t", "domains": ["crm", "finance"],
        "risk": "high", "execution_target": {"n": 2.0, "url": "https://x/\u00e9"},
    }  # fmt: skip
    edited = ledger.propose("pay", "s", PAYMENT, **options)
    successor = ledger.edit(edited.proposal_id, {**PAYMENT, "amount": 5}, "op")
    assert (successor.domains, successor.user, successor.risk) == (
        ("crm", "finance"), "bob", "high"
    )  # fmt: skip
    ledger.approve(successor.proposal_id, "op")
    ledger.extend(successor.proposal_id, 60, "op")
    ledger.claim(successor.proposal_id, successor.args_hash, "w")
    ledger.fail(successor.proposal_id, "error", "boom", result_ref="blob:trace")
    crashed = ledger.propose("pay", "s", {**PAYMENT, "n": 2}, **options)
    ledger.approve(crashed.proposal_id, "op")
    ledger.claim(crashed.proposal_id, crashed.args_hash, "w")
    ledger.recover(is_alive=lambda pid, host: False)
    ledger.reconcile(crashed.proposal_id, "executed", "op", "checked")
    report = ledger.verify()
    assert report.ok, report.mismatches


# end to end: a resumed agent and a forged supersede link --------------------------------------


def test_a_resumed_agent_never_runs_a_call_with_a_forged_supersede_link(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.agents import ADA, approved_create_customer, side_effects

    from supervisor import SQLModelProvider
    from supervisor.testing import CallTools, ScriptedModel, ToolCall

    monkeypatch.setenv("SIDE_EFFECT_FILE", str(tmp_path / "side_effects.log"))
    with (
        SQLModelProvider(sqlite_url) as provider,
        ScriptedModel([CallTools([ToolCall("create_customer", ADA)])]) as model,
    ):
        agent, proposal = approved_create_customer(provider, model, "linked-agent")
        # A link to some other proposal makes the runtime tell the model a human edited it.
        attacker = sa.create_engine(sqlite_url)
        sql(attacker, "UPDATE proposal SET supersedes_id = :other", other="f" * 32)
        attacker.dispose()
        resumed = agent.resume_approval(proposal.proposal_id)
        assert not resumed.consumed
        assert resumed.error_code == "audit_mismatch"
        assert checks(provider.ledger.verify(), proposal.proposal_id) == {"supersedes_id"}
    assert side_effects() == []
