"""The grants service without an event loop, on a real SQLite ledger: what the grant dialog
offers per argument, which pending proposals a grant matches, and that a refused grant
changes nothing."""

from __future__ import annotations

import pytest
from tui_helpers import propose

from supervisor.ledger.errors import GrantRefused
from supervisor.ledger.models import ProposalStatus
from supervisor.rules.grants import GrantInvalid, check_patterns
from supervisor.services.approvals import ApprovalsService
from supervisor.services.grants import (
    GrantNotForQuorum,
    GrantRequest,
    GrantsService,
    NoLongerSimilar,
    grant_refusal,
    pattern_from_text,
    pattern_options,
    similar_pending,
)
from supervisor.services.guard import RenderGuardMissing
from supervisor.services.identity import ApproverIdentity
from supervisor.services.rendering import render_arguments
from supervisor.store.provider import SQLModelProvider


def _kinds(value: object) -> dict[str, str]:
    return {option.kind: option.prefill for option in pattern_options(value)}


def test_each_argument_is_offered_the_patterns_its_value_allows_with_a_prefill() -> None:
    assert _kinds("/srv/app/logs/a.txt") == {
        "exact": '"/srv/app/logs/a.txt"', "prefix": "/srv/app/logs/",
    }  # fmt: skip
    assert _kinds("/srv") == {"exact": '"/srv"', "prefix": "/srv/"}
    assert _kinds("https://docs.example.com:8443/a?b=1") == {
        "exact": '"https://docs.example.com:8443/a?b=1"',
        "origin": "https://docs.example.com:8443",
    }
    assert _kinds(125.5) == {"exact": "125.5", "range": "0..125.5"}
    assert _kinds(-3) == {"exact": "-3", "range": "-3..0"}
    assert set(_kinds(True)) == {"exact"}  # a bool is not a number here
    assert set(_kinds({"nested": 1})) == {"exact"}
    assert set(_kinds("relative/path")) == {"exact"}
    assert pattern_from_text("amount", "range", "0..50") == {"range": [0, 50]}
    assert pattern_from_text("amount", "exact", "ignored") is None
    with pytest.raises(GrantInvalid):
        pattern_from_text("amount", "range", "0-50")


def test_similar_pending_matches_as_the_ledger_would(provider: SQLModelProvider) -> None:
    ledger = provider.ledger
    source = propose(ledger, "write_file", arguments={"path": "/srv/app/a.txt", "mode": "w"})
    twin = propose(ledger, "write_file", arguments={"path": "/srv/app/b.txt", "mode": "w"})
    other_agent = propose(
        ledger, "write_file", owner="ops-agent", arguments={"path": "/srv/app/c.txt", "mode": "w"}
    )
    outside = propose(ledger, "write_file", arguments={"path": "/etc/passwd", "mode": "w"})
    appending = propose(ledger, "write_file", arguments={"path": "/srv/app/d.txt", "mode": "a"})
    elsewhere = propose(
        ledger, "write_file", arguments={"path": "/srv/app/e.txt", "mode": "w"},
        execution_target={"backend": "remote"},
    )  # fmt: skip
    secret = propose(
        ledger, "write_file", arguments={"path": "/srv/app/f.txt", "mode": "w"}, grantable=False
    )
    pending = [source, twin, other_agent, outside, appending, elsewhere, secret]
    checked = check_patterns({"path": {"prefix": "/srv/app/"}}, source.arguments)
    assert [p.proposal_id for p in similar_pending(source, checked, pending)] == [twin.proposal_id]
    wide = similar_pending(source, checked, pending, any_agent=True)
    assert [p.proposal_id for p in wide] == [twin.proposal_id, other_agent.proposal_id]


def test_a_refused_grant_changes_nothing(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    approvals = ApprovalsService(ledger, identity)
    grants = GrantsService(approvals)
    never = propose(ledger, "read_secret", arguments={"name": "db"}, grantable=False)
    assert isinstance(grant_refusal(never), GrantRefused)
    plain = propose(ledger, "write_file", arguments={"path": "/srv/a", "mode": "w"})
    guard_never = approvals.confirm_rendered(never, render_arguments(never.arguments))
    guard_plain = approvals.confirm_rendered(plain, render_arguments(plain.arguments))
    with pytest.raises(RenderGuardMissing):
        grants.approve_similar(GrantRequest(plain.proposal_id, {}, 60, 5), None)
    with pytest.raises(GrantRefused, match="never-grantable"):
        grants.approve_similar(GrantRequest(never.proposal_id, {}, 60, 5), guard_never)
    # A lifetime the ledger would refuse only after approving is refused before it.
    with pytest.raises(GrantRefused, match="a grant lasts"):
        grants.approve_similar(GrantRequest(plain.proposal_id, {}, 0, 5), guard_plain)
    with pytest.raises(GrantInvalid):
        grants.approve_similar(
            GrantRequest(plain.proposal_id, {"path": {"prefix": "/etc/"}}, 60, 5), guard_plain
        )
    for proposal in (never, plain):
        assert ledger.get(proposal.proposal_id).status is ProposalStatus.PENDING
    assert ledger.grants() == []


def test_a_quorum_proposal_is_not_grantable(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    from supervisor.ledger.policy import ApprovalPolicy

    policy = ApprovalPolicy.from_toml(
        '[[rules]]\nname = "two sign"\nverdict = "ask"\napprovals = 2\nreason = "big"\n'
        'tool = "refund"\n',
        source="test",
    )
    provider.ledger.apply_policy(policy)
    big = propose(provider.ledger, "refund", arguments={"amount": 5000})
    assert big.approvals_required == 2
    assert isinstance(grant_refusal(big), GrantNotForQuorum)


def test_approve_similar_grants_and_approves_only_the_listed_that_still_match(
    provider: SQLModelProvider, identity: ApproverIdentity
) -> None:
    ledger = provider.ledger
    approvals = ApprovalsService(ledger, identity)
    grants = GrantsService(approvals)
    source = propose(ledger, "write_file", arguments={"path": "/srv/app/a.txt", "mode": "w"})
    twin = propose(ledger, "write_file", arguments={"path": "/srv/app/b.txt", "mode": "w"})
    gone = propose(ledger, "write_file", arguments={"path": "/srv/app/c.txt", "mode": "w"})
    ledger.reject(gone.proposal_id, "bob", "not this one")
    guard = approvals.confirm_rendered(source, render_arguments(source.arguments))
    request = GrantRequest(
        source.proposal_id, {"path": {"prefix": "/srv/app/"}}, 900, 20,
        also_approve=(twin.proposal_id, gone.proposal_id),
    )  # fmt: skip
    result = grants.approve_similar(request, guard)
    assert result.proposal.status is ProposalStatus.APPROVED
    assert [p.proposal_id for p in result.approved] == [twin.proposal_id]
    assert len(result.failed) == 1 and isinstance(result.failed[0], NoLongerSimilar)
    assert ledger.get(twin.proposal_id).approver_id == identity.approver_id
    assert result.grant.approver_id == identity.approver_id
    assert [g.grant_id for g in grants.refresh().grants] == [result.grant.grant_id]
    later = propose(ledger, "write_file", arguments={"path": "/srv/app/z.txt", "mode": "w"})
    assert later.status is ProposalStatus.APPROVED
    assert later.decided_by_rule == f"grant:{result.grant.grant_id}"
    revoked = grants.revoke(result.grant.grant_id)
    assert revoked.revoked_by == identity.approver_id
    after = propose(ledger, "write_file", arguments={"path": "/srv/app/y.txt", "mode": "w"})
    assert after.status is ProposalStatus.PENDING
