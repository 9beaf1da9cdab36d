"""``supervisor policy batch``: approve, after listing them, the pending calls one rule of the
policy in force (or one grant) matches; nothing else is approved."""

from __future__ import annotations

from pathlib import Path

from support.cli import assert_one_line_error, run_cli

from supervisor.ledger.models import ProposalStatus
from supervisor.store.provider import SQLModelProvider

POLICY = """
[[rules]]
name = "small refunds"
verdict = "allow"
reason = "Refunds under 100 are routine"
tool = "refund"
when = "args.amount < 100"

[[rules]]
name = "refunds abroad"
verdict = "deny"
reason = "Treasury desk"
tool = "refund"
when = "args.country != 'GB'"
"""


def _refund(url: str, amount: int, country: str = "GB") -> str:
    with SQLModelProvider(url) as provider:
        proposal = provider.ledger.propose(
            "refund", "s" * 64, {"amount": amount, "country": country}, owner="billing"
        )
    return proposal.proposal_id


def _status(url: str, proposal_id: str) -> ProposalStatus:
    with SQLModelProvider(url) as provider:
        return provider.ledger.get(proposal_id).status


def test_batch_by_rule_lists_first_and_approves_exactly_what_the_rule_matches(
    sqlite_url: str, tmp_path: Path
) -> None:
    small, other_small, large, abroad = (
        _refund(sqlite_url, 20),
        _refund(sqlite_url, 40),
        _refund(sqlite_url, 500),
        _refund(sqlite_url, 20, "FR"),
    )  # fmt: skip  (asked before the rule existed)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    assert run_cli("policy", "apply", str(policy), "--db", sqlite_url).returncode == 0

    listed = run_cli("policy", "batch", "--rule", "small refunds", "--db", sqlite_url)
    assert listed.returncode == 0, listed.stderr
    assert "2 pending proposal(s) match rule small refunds" in listed.stdout
    assert small in listed.stdout and other_small in listed.stdout
    assert large not in listed.stdout and abroad not in listed.stdout  # abroad: denied
    assert "Nothing approved: pass --yes" in listed.stdout
    assert _status(sqlite_url, small) is ProposalStatus.PENDING

    done = run_cli("policy", "batch", "--rule", "small refunds", "--yes", "--reason", "rule",
                   "--db", sqlite_url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [_status(sqlite_url, p) for p in (small, other_small, large, abroad)] == [
        ProposalStatus.APPROVED, ProposalStatus.APPROVED, ProposalStatus.PENDING,
        ProposalStatus.PENDING,
    ]  # fmt: skip

    denied = run_cli("policy", "batch", "--rule", "refunds abroad", "--db", sqlite_url)
    assert_one_line_error(denied, "template_rule_unusable")
    assert_one_line_error(run_cli("policy", "batch", "--db", sqlite_url), "batch_template_missing")


def test_batch_by_grant_approves_the_pending_calls_the_grant_would_allow(
    sqlite_url: str,
) -> None:
    first, inside, outside = (
        _refund(sqlite_url, 20),
        _refund(sqlite_url, 30),
        _refund(sqlite_url, 90),
    )
    with SQLModelProvider(sqlite_url) as provider:
        _, grant = provider.ledger.approve_similar(
            first, "operator", patterns={"amount": {"range": [0, 50]}}
        )
    done = run_cli("policy", "batch", "--grant", grant.grant_id[:12], "--yes", "--db", sqlite_url)
    assert done.returncode == 0, done.stderr
    assert f"1 pending proposal(s) match grant {grant.grant_id}" in done.stdout
    assert _status(sqlite_url, inside) is ProposalStatus.APPROVED
    assert _status(sqlite_url, outside) is ProposalStatus.PENDING
