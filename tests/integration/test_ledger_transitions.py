"""Every approval-ledger transition and refusal, on a real SQLite file and real PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from supervisor.canonical import args_hash
from supervisor.errors import CanonicalJSONError
from supervisor.ledger import (
    ApprovalAlreadyDecided,
    ApprovalPolicy,
    ApproverContext,
    ApproverNotAllowed,
    ArgumentsMismatch,
    ExecutorIdentity,
    ManualClock,
    NotApproved,
    NotOwner,
    Proposal,
    ProposalNotFound,
    ProposalStatus,
    SelfApprovalForbidden,
)
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.engine import create_ledger_engine

CTX = ApproverContext(os_user="alice", host="desk", pid=4242, tty="/dev/pts/3", via="tui")


def propose(ledger: ApprovalLedger, **overrides: object) -> Proposal:
    params: dict[str, object] = {
        "tool_name": "create_customer",
        "tool_schema_hash": "schema-v1",
        "arguments": {"name": "Ada", "email": "ada@example.com"},
        "policy_reason": "Creates a customer in the production CRM",
        "owner": "operations-agent",
        "user": "bob",
        "thread_id": "thread-1",
        "checkpoint_id": "ckpt-1",
        "call_id": "call-1",
        "domains": ("crm",),
    }
    params.update(overrides)
    return ledger.propose(**params)  # type: ignore[arg-type]


def approved(ledger: ApprovalLedger, **overrides: object) -> Proposal:
    return ledger.approve(propose(ledger, **overrides).proposal_id, "op@example.com", "ok")


# propose / get ----------------------------------------------------------------------------


def test_propose_stores_exact_call_and_hash(ledger: ApprovalLedger, clock: ManualClock) -> None:
    proposal = propose(
        ledger, arguments={"n": 2.0, "name": "Zoë"}, execution_target={"sandbox": "sb-1"}
    )
    assert proposal.status is ProposalStatus.PENDING
    assert proposal.arguments == {"n": 2, "name": "Zoë"}
    assert proposal.args_hash == args_hash(
        "create_customer", "schema-v1", {"name": "Zoë", "n": 2}, {"sandbox": "sb-1"}
    )
    assert (proposal.call_id, proposal.checkpoint_id) == ("call-1", "ckpt-1")
    assert proposal.created_at == clock.now()
    assert proposal.expires_at == clock.now() + timedelta(seconds=ledger.default_ttl_seconds)
    stored = ledger.get(proposal.proposal_id)
    assert stored == proposal
    assert stored["proposal_id"] == proposal.proposal_id
    assert stored["status"] == "pending"
    assert stored.get("missing", "dflt") == "dflt"
    assert "thread_id" in stored.keys()
    assert dict(stored)["owner"] == "operations-agent"
    assert [(e.action, e.subject) for e in ledger.events_since(0)] == [
        ("propose", proposal.proposal_id)
    ]


def test_proposal_survives_a_new_engine(ledger_url: str, ledger: ApprovalLedger) -> None:
    proposal = propose(ledger)
    other_engine = create_ledger_engine(ledger_url)
    try:
        assert ApprovalLedger(other_engine).get(proposal.proposal_id) == proposal
    finally:
        other_engine.dispose()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), object()])
def test_propose_refuses_non_json_arguments(ledger: ApprovalLedger, bad: object) -> None:
    with pytest.raises(CanonicalJSONError):
        propose(ledger, arguments={"x": bad})
    assert ledger.list().items == ()


def test_propose_refuses_non_positive_ttl(ledger: ApprovalLedger) -> None:
    with pytest.raises(ValueError, match="ttl_seconds"):
        propose(ledger, ttl_seconds=0)


def test_get_unknown_raises_not_found(ledger: ApprovalLedger) -> None:
    with pytest.raises(ProposalNotFound) as caught:
        ledger.get("nope")
    assert caught.value.code == "proposal_not_found"


# decisions --------------------------------------------------------------------------------


def test_approve_records_approver_identity(ledger: ApprovalLedger, clock: ManualClock) -> None:
    proposal = propose(ledger)
    clock.advance(5)
    decided = ledger.approve(
        proposal.proposal_id, "op@example.com", "reviewed", context=CTX, via="cli"
    )
    assert decided.status is ProposalStatus.APPROVED
    assert decided.approver_id == "op@example.com"
    assert decided.decision_reason == "reviewed"
    assert decided.decided_at == clock.now()
    assert decided.approver_context == CTX.model_copy(update={"via": "cli"})
    assert ledger.get(proposal.proposal_id) == decided
    last = ledger.events_since(0)[-1]
    assert (last.action, last.actor, last.payload["to"]) == (
        "approve",
        "op@example.com",
        "approved",
    )
    assert last.payload["context"]["os_user"] == "alice"


def test_approve_captures_process_context_by_default(ledger: ApprovalLedger) -> None:
    decided = approved(ledger)
    assert decided.approver_context is not None
    assert decided.approver_context.via == "sdk"
    assert decided.approver_context.pid > 0


def test_second_decision_names_winner_and_time(ledger: ApprovalLedger, clock: ManualClock) -> None:
    proposal = propose(ledger)
    first = ledger.approve(proposal.proposal_id, "alice", "yes")
    clock.advance(30)
    with pytest.raises(ApprovalAlreadyDecided) as caught:
        ledger.reject(proposal.proposal_id, "mallory", "no")
    error = caught.value
    assert (error.status, error.by, error.at) == ("approved", "alice", first.decided_at)
    assert "alice" in str(error) and "approved" in str(error)
    assert error.to_dict()["code"] == "approval_already_decided"
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.APPROVED


def test_reject(ledger: ApprovalLedger) -> None:
    proposal = propose(ledger)
    rejected = ledger.reject(proposal.proposal_id, "carol", "wrong customer")
    assert rejected.status is ProposalStatus.REJECTED
    assert rejected.approver_id == "carol"
    with pytest.raises(ApprovalAlreadyDecided, match="rejected"):
        ledger.approve(proposal.proposal_id, "dave")


def test_cancel_pending_only(ledger: ApprovalLedger) -> None:
    proposal = propose(ledger)
    assert ledger.cancel(proposal.proposal_id, "bob").status is ProposalStatus.CANCELLED
    other = approved(ledger)
    with pytest.raises(ApprovalAlreadyDecided):
        ledger.cancel(other.proposal_id, "bob")


def test_revoke_takes_back_an_approval(ledger: ApprovalLedger) -> None:
    proposal = approved(ledger)
    revoked = ledger.revoke(proposal.proposal_id, "alice", "changed my mind")
    assert revoked.status is ProposalStatus.CANCELLED
    with pytest.raises(ApprovalAlreadyDecided):
        ledger.claim(proposal.proposal_id, proposal.args_hash)
    with pytest.raises(NotApproved):
        ledger.revoke(propose(ledger).proposal_id, "alice")


def test_edit_supersedes_with_link_and_diff(ledger: ApprovalLedger) -> None:
    old = propose(ledger, arguments={"name": "Ada", "email": "ada@x.com", "tags": ["a"]})
    new = ledger.edit(
        old.proposal_id, {"name": "Ada L.", "email": "ada@x.com", "vip": True}, "alice", "typo"
    )
    assert new.status is ProposalStatus.PENDING
    assert new.supersedes_id == old.proposal_id
    assert new.args_hash == args_hash(
        old.tool_name, old.tool_schema_hash, {"name": "Ada L.", "email": "ada@x.com", "vip": True}
    )
    assert new.args_hash != old.args_hash
    assert (new.owner, new.thread_id, new.domains, new.call_id, new.checkpoint_id) == (
        old.owner, old.thread_id, old.domains, "call-1", "ckpt-1",
    )  # fmt: skip
    superseded = ledger.get(old.proposal_id)
    assert superseded.status is ProposalStatus.SUPERSEDED
    assert superseded.superseded_by_id == new.proposal_id
    edit_event = next(e for e in ledger.events_since(0) if e.action == "edit")
    assert sorted((c["op"], c["path"]) for c in edit_event.payload["diff"]) == [
        ("added", "$.vip"),
        ("changed", "$.name"),
        ("removed", "$.tags"),
    ]
    with pytest.raises(ApprovalAlreadyDecided, match="superseded"):
        ledger.approve(old.proposal_id, "alice")
    with pytest.raises(ApprovalAlreadyDecided):
        ledger.edit(old.proposal_id, {"name": "x"}, "alice")
    assert ledger.approve(new.proposal_id, "alice").status is ProposalStatus.APPROVED


def test_extend_pushes_expiry_and_is_audited(ledger: ApprovalLedger) -> None:
    proposal = propose(ledger, ttl_seconds=60)
    extended = ledger.extend(proposal.proposal_id, 120, "alice", "needs a call")
    assert extended.expires_at == proposal.expires_at + timedelta(seconds=120)
    event = ledger.events_since(0)[-1]
    assert event.action == "extend"
    assert event.payload["new_expires_at"] == extended.expires_at.isoformat()
    rejected = ledger.reject(propose(ledger).proposal_id, "alice")
    with pytest.raises(ApprovalAlreadyDecided):
        ledger.extend(rejected.proposal_id, 60, "alice")
    with pytest.raises(ValueError):
        ledger.extend(proposal.proposal_id, 0, "alice")


# claim / complete / fail ------------------------------------------------------------------


def test_claim_writes_executing_ahead(ledger: ApprovalLedger, clock: ManualClock) -> None:
    proposal = approved(ledger)
    worker = ExecutorIdentity(executor_id="worker-1", pid=12345, host="h1")
    execution = ledger.claim(proposal.proposal_id, proposal.args_hash, worker)
    assert execution.state == "executing"
    assert execution.executor == worker
    assert execution.started_at == clock.now()
    assert execution.args_hash == proposal.args_hash
    assert ledger.execution(proposal.proposal_id) == execution
    assert ledger.execution(propose(ledger).proposal_id) is None
    claimed = ledger.get(proposal.proposal_id)
    assert claimed.status is ProposalStatus.EXECUTING
    assert claimed.consumed


def test_second_claim_names_first_executor(ledger: ApprovalLedger, clock: ManualClock) -> None:
    proposal = approved(ledger)
    first = ledger.claim(proposal.proposal_id, proposal.args_hash, "resumer-a")
    clock.advance(1)
    with pytest.raises(ApprovalAlreadyDecided) as caught:
        ledger.claim(proposal.proposal_id, proposal.args_hash, "resumer-b")
    assert (caught.value.by, caught.value.at) == ("resumer-a", first.started_at)
    assert caught.value.status == "executing"


def test_claim_refuses_pending(ledger: ApprovalLedger) -> None:
    proposal = propose(ledger)
    with pytest.raises(NotApproved) as caught:
        ledger.claim(proposal.proposal_id, proposal.args_hash)
    assert caught.value.code == "not_approved"


def test_claim_refuses_other_arguments(ledger: ApprovalLedger) -> None:
    proposal = approved(ledger)
    other = args_hash(proposal.tool_name, proposal.tool_schema_hash, {"name": "Eve"})
    with pytest.raises(ArgumentsMismatch):
        ledger.claim(proposal.proposal_id, other)
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.APPROVED
    assert ledger.events_since(0)[-1].action == "claim_refused"
    assert ledger.claim(proposal.proposal_id, proposal.args_hash).state == "executing"


def test_complete_records_outcome_once(ledger: ApprovalLedger, clock: ManualClock) -> None:
    proposal = approved(ledger)
    ledger.claim(proposal.proposal_id, proposal.args_hash, "w")
    clock.advance(2)
    done = ledger.complete(proposal.proposal_id, "fallback", "blob:abc", executor="w")
    assert (done.state, done.outcome_status, done.result_ref) == (
        "executed",
        "fallback",
        "blob:abc",
    )
    assert done.finished_at == clock.now()
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.EXECUTED
    with pytest.raises(ApprovalAlreadyDecided):
        ledger.complete(proposal.proposal_id)
    with pytest.raises(ApprovalAlreadyDecided):
        ledger.fail(proposal.proposal_id)
    with pytest.raises(ApprovalAlreadyDecided):
        ledger.claim(proposal.proposal_id, proposal.args_hash)


def test_fail_records_reason(ledger: ApprovalLedger) -> None:
    proposal = approved(ledger)
    ledger.claim(proposal.proposal_id, proposal.args_hash, "w")
    failed = ledger.fail(proposal.proposal_id, "provider_error", "CRM timed out")
    assert (failed.state, failed.outcome_status, failed.reason) == (
        "failed",
        "provider_error",
        "CRM timed out",
    )
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.FAILED


def test_complete_by_another_executor_is_refused(ledger: ApprovalLedger) -> None:
    proposal = approved(ledger)
    ledger.claim(proposal.proposal_id, proposal.args_hash, "worker-a")
    with pytest.raises(NotOwner):
        ledger.complete(proposal.proposal_id, executor="worker-b")
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.EXECUTING


def test_the_claiming_ledger_finishes_what_it_claimed_as_stored(
    engine: Engine, ledger: ApprovalLedger, clock: ManualClock
) -> None:
    """The ledger that claimed a proposal finishes it without reading the execution again:
    what it returns is what another process reads back."""
    other = ApprovalLedger(engine, clock)
    try:
        proposal = approved(ledger)
        ledger.claim(proposal.proposal_id, proposal.args_hash, "w")
        clock.advance(3)
        done = ledger.complete(proposal.proposal_id, "success", "blob:1", executor="w")
        assert done == other.execution(proposal.proposal_id)
        assert other.get(proposal.proposal_id).status is ProposalStatus.EXECUTED
        assert other.verify().ok
    finally:
        other.close()


@pytest.mark.parametrize("finish", ["complete", "fail"])
def test_the_claimer_cannot_finish_what_another_process_flagged(
    engine: Engine, ledger: ApprovalLedger, clock: ManualClock, finish: str
) -> None:
    """A claim flagged for reconciliation by another process (its executor looked dead) is
    refused to the claimer too, although it still holds the execution it claimed: nothing is
    written, and the flag stands for a person to decide."""
    other = ApprovalLedger(engine, clock)
    try:
        proposal = approved(ledger)
        ledger.claim(
            proposal.proposal_id, proposal.args_hash,
            ExecutorIdentity(executor_id="w", pid=1, host="x"),
        )  # fmt: skip
        assert [e.proposal_id for e in other.recover(is_alive=lambda pid, host: False)] == [
            proposal.proposal_id
        ]
        records = len(other.audit_of(proposal.proposal_id))
        with pytest.raises(ApprovalAlreadyDecided):
            getattr(ledger, finish)(proposal.proposal_id, executor="w")
        assert other.get(proposal.proposal_id).status is ProposalStatus.NEEDS_RECONCILIATION
        execution = other.execution(proposal.proposal_id)
        assert execution is not None and execution.state == "needs_reconciliation"
        assert len(other.audit_of(proposal.proposal_id)) == records
        assert other.verify().ok
    finally:
        other.close()


def test_complete_unclaimed_is_refused(ledger: ApprovalLedger) -> None:
    proposal = approved(ledger)
    with pytest.raises(ApprovalAlreadyDecided):
        ledger.complete(proposal.proposal_id)


def test_recover_flags_dead_executors_and_never_reruns(ledger: ApprovalLedger) -> None:
    dead = approved(ledger)
    alive = approved(ledger)
    ledger.claim(
        dead.proposal_id, dead.args_hash, ExecutorIdentity(executor_id="d", pid=1, host="x")
    )
    ledger.claim(
        alive.proposal_id, alive.args_hash, ExecutorIdentity(executor_id="a", pid=2, host="x")
    )
    flagged = ledger.recover(is_alive=lambda pid, host: pid == 2)
    assert [e.proposal_id for e in flagged] == [dead.proposal_id]
    assert flagged[0].state == "needs_reconciliation"
    assert ledger.get(dead.proposal_id).status is ProposalStatus.NEEDS_RECONCILIATION
    assert ledger.get(alive.proposal_id).status is ProposalStatus.EXECUTING
    assert ledger.recover(is_alive=lambda pid, host: pid == 2) == []
    with pytest.raises(ApprovalAlreadyDecided):
        ledger.claim(dead.proposal_id, dead.args_hash)
    with pytest.raises(ApprovalAlreadyDecided):
        ledger.complete(dead.proposal_id)
    resolved = ledger.reconcile(dead.proposal_id, "executed", "alice", "checked the CRM")
    assert resolved.state == "executed"
    assert ledger.get(dead.proposal_id).status is ProposalStatus.EXECUTED


def test_default_recover_uses_local_pids(ledger: ApprovalLedger) -> None:
    import socket
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    gone = approved(ledger)
    mine = approved(ledger)
    host = socket.gethostname()
    ledger.claim(
        gone.proposal_id,
        gone.args_hash,
        ExecutorIdentity(executor_id="g", pid=child.pid, host=host),
    )
    ledger.claim(mine.proposal_id, mine.args_hash, ExecutorIdentity.current("me"))
    assert [e.proposal_id for e in ledger.recover()] == [gone.proposal_id]


# list -------------------------------------------------------------------------------------


def test_list_filters(ledger: ApprovalLedger, clock: ManualClock) -> None:
    a = propose(ledger, owner="agent-a", thread_id="t1", domains=("crm",))
    clock.advance(1)
    b = propose(
        ledger, owner="agent-b", thread_id="t2", tool_name="send_email", domains=("mail", "crm")
    )
    clock.advance(1)
    c = approved(ledger, owner="agent-a", thread_id="t2", domains=())

    def ids(**filters: object) -> list[str]:
        return [p.proposal_id for p in ledger.list(**filters).items]  # type: ignore[arg-type]

    assert ids(status="pending") == [a.proposal_id, b.proposal_id]
    assert ids(status=["approved", "pending"]) == [a.proposal_id, b.proposal_id, c.proposal_id]
    assert ids(owner="agent-a") == [a.proposal_id, c.proposal_id]
    assert ids(thread_id="t2") == [b.proposal_id, c.proposal_id]
    assert ids(tool_name="send_email") == [b.proposal_id]
    assert ids(domain="crm") == [a.proposal_id, b.proposal_id]
    assert ids(domain="mail", status="pending") == [b.proposal_id]
    assert ids(domain="nothing") == []


def test_keyset_pagination_is_stable(ledger: ApprovalLedger, clock: ManualClock) -> None:
    created = []
    for index in range(23):
        created.append(propose(ledger).proposal_id)
        if index % 5 == 0:
            clock.advance(1)  # many proposals share a created_at: the id breaks ties
    expected = [
        p.proposal_id
        for p in sorted(
            (ledger.get(i) for i in created), key=lambda p: (p.created_at, p.proposal_id)
        )
    ]
    clock.advance(1)
    seen: list[str] = []
    cursor = None
    while True:
        page = ledger.list(status="pending", limit=5, cursor=cursor)
        seen.extend(p.proposal_id for p in page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
        propose(ledger, ttl_seconds=999)  # new arrivals land after the cursor, never duplicate
    assert seen[:23] == expected
    assert len(seen) == len(set(seen))
    newest = ledger.list(status="pending", limit=3, newest_first=True)
    second = ledger.list(status="pending", limit=3, newest_first=True, cursor=newest.next_cursor)
    ordered = [p.proposal_id for p in newest.items + second.items]
    assert (
        ordered
        == [
            p.proposal_id
            for p in sorted(
                ledger.list(status="pending", limit=1000).items,
                key=lambda p: (p.created_at, p.proposal_id),
                reverse=True,
            )
        ][:6]
    )


# policies ---------------------------------------------------------------------------------


def test_self_approval_can_be_forbidden(engine: Engine, clock: ManualClock) -> None:
    # The rule matches the OS user of the deciding process, not the approver id (a label).
    me = EnvironmentIdentity.current()
    strict = ApprovalLedger(engine, clock, policy=ApprovalPolicy(forbid_self_approval=True))
    for requester in (me.user, f"{me.user}@{me.host}"):
        proposal = propose(strict, user=requester)
        for label in ("alice", requester):
            with pytest.raises(SelfApprovalForbidden) as caught:
                strict.approve(proposal.proposal_id, label, context=CTX)
            assert caught.value.code == "self_approval_forbidden"
        assert strict.get(proposal.proposal_id).status is ProposalStatus.PENDING
    assert strict.approve(propose(strict, user="bob").proposal_id, "bob").approver_id == "bob"
    # Opening the same ledger without a policy enforces the stored one.
    stored = ApprovalLedger(engine, clock)
    with pytest.raises(SelfApprovalForbidden):
        stored.approve(propose(stored, user=me.user).proposal_id, "alice")


def test_approvers_allowlisted_per_domain(engine: Engine, clock: ManualClock) -> None:
    me = EnvironmentIdentity.current()
    ledger = ApprovalLedger(
        engine, clock, policy=ApprovalPolicy(approvers_by_domain={"payments": {"cfo"}})
    )
    paying = propose(ledger, domains=("crm", "payments"))
    with pytest.raises(ApproverNotAllowed) as caught:
        ledger.approve(paying.proposal_id, "cfo")  # the label is not who decides
    assert "payments" in str(caught.value)
    with pytest.raises(ApproverNotAllowed):
        ledger.edit(paying.proposal_id, {"name": "x"}, "cfo")
    assert ledger.approve(propose(ledger).proposal_id, "intern").status is ProposalStatus.APPROVED
    assert ledger.reject(propose(ledger, domains=("payments",)).proposal_id, "intern").status is (
        ProposalStatus.REJECTED
    )
    for listed in (me.user, f"{me.user}@{me.host}"):
        ledger.apply_policy(ApprovalPolicy(approvers_by_domain={"payments": {listed}}))
        allowed = propose(ledger, domains=("crm", "payments"))
        assert ledger.approve(allowed.proposal_id, "intern").status is ProposalStatus.APPROVED
    ledger.apply_policy(ApprovalPolicy(approvers_by_domain={"payments": {f"{me.user}@elsewhere"}}))
    with pytest.raises(ApproverNotAllowed):
        ledger.approve(paying.proposal_id, "intern")


# races (threads on separate engines = separate connections) -------------------------------


def test_two_approvers_racing_one_wins(ledger_url: str, ledger: ApprovalLedger) -> None:
    proposals = [propose(ledger) for _ in range(10)]
    engines = [create_ledger_engine(ledger_url) for _ in range(2)]
    outcomes: dict[str, list[tuple[str, str]]] = {p.proposal_id: [] for p in proposals}
    barrier = threading.Barrier(2)

    def decide(name: str, engine: Engine) -> None:
        racer = ApprovalLedger(engine)
        barrier.wait()
        for proposal in proposals:
            try:
                racer.approve(proposal.proposal_id, name)
                outcomes[proposal.proposal_id].append(("won", name))
            except ApprovalAlreadyDecided as error:
                outcomes[proposal.proposal_id].append(("lost", str(error.by)))

    threads = [
        threading.Thread(target=decide, args=(f"approver-{i}", eng))
        for i, eng in enumerate(engines)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        for eng in engines:
            eng.dispose()
    for proposal_id, results in outcomes.items():
        assert sorted(kind for kind, _ in results) == ["lost", "won"]
        winner = next(who for kind, who in results if kind == "won")
        assert next(who for kind, who in results if kind == "lost") == winner
        assert ledger.get(proposal_id).approver_id == winner
    assert ledger.verify().ok
