"""Batch by template: the pending proposals one rule of the stored policy, or one grant, matches.

An operator who just applied a rule (or made a grant) still has the calls that were asked
before it: this lists them, so they can be approved together after the list was shown
(``supervisor policy batch --rule NAME | --grant ID``; the TUI's grant dialog lists the
ones a new grant would match). Quorum proposals are never batch-approved (each needs its own
approvers), nor calls the whole policy would deny.
"""

from __future__ import annotations

from collections.abc import Iterable

from supervisor.errors import SupervisorError
from supervisor.ledger.grants import Grant
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.ledger.policy import ApprovalPolicy
from supervisor.rules.loader import rules_from_document
from supervisor.rules.replay import call_facts_of


class TemplateRuleUnusable(SupervisorError, LookupError):
    """The named rule is not an allow or ask rule of the policy in force."""

    code = "template_rule_unusable"


def _batchable(proposal: Proposal) -> bool:
    return proposal.status is ProposalStatus.PENDING and proposal.approvals_required <= 1


def pending_matching_rule(
    policy: ApprovalPolicy, rule_name: str, pending: Iterable[Proposal]
) -> list[Proposal]:
    """The pending proposals the rule ``rule_name`` of ``policy`` matches (its match and its
    condition), leaving out those the whole policy would deny.

    Raises:
        TemplateRuleUnusable: ``policy`` has no such rule, or it is a deny rule.
    """
    tables = [rule for rule in policy.rules if rule.get("name") == rule_name]
    if not tables or tables[0].get("verdict") == "deny":
        known = ", ".join(repr(rule.get("name")) for rule in policy.rules if
                          rule.get("verdict") != "deny") or "none"  # fmt: skip
        raise TemplateRuleUnusable(
            f"the policy in force has no allow or ask rule named {rule_name!r}",
            hint=f"Name one of its allow or ask rules ({known}); `supervisor policy show`.",
        )
    alone = rules_from_document({"rules": [dict(tables[0])]})
    found = []
    for proposal in pending:
        if not _batchable(proposal):
            continue
        facts = call_facts_of(proposal)
        if alone.evaluate(facts).rule != rule_name:
            continue
        if policy.ruleset.evaluate(facts).verdict == "deny":
            continue
        found.append(proposal)
    return found


def pending_matching_grant(grant: Grant, pending: Iterable[Proposal]) -> list[Proposal]:
    """The pending proposals ``grant`` would allow if they were proposed now (the ledger's own
    test: tool, schema hash, target, agent, grantable, arguments)."""
    scope = grant.scope
    return [
        proposal
        for proposal in pending
        if _batchable(proposal) and proposal.grantable and scope.covers_proposal(proposal)
    ]
