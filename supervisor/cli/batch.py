"""``supervisor policy batch --rule NAME | --grant ID``: approve, after showing the list, the
pending proposals one rule of the policy in force (or one grant) matches."""

from __future__ import annotations

import click

from supervisor.cli.output import echo_line
from supervisor.cli.proposals import _approver, db_option, open_recovered
from supervisor.errors import SupervisorError
from supervisor.ledger.ids import resolve_id

#: Approvals per write (``approve_many``): each write holds the ledger's chain lock while it
#: runs, so a long list is approved in several, letting other writers in between.
_PER_WRITE = 100


class BatchTemplateMissing(SupervisorError, ValueError):
    """Neither (or both of) --rule and --grant was given."""

    code = "batch_template_missing"


@click.command("batch")
@click.option("--rule", "rule_name", default=None, help="An allow or ask rule of the policy.")
@click.option("--grant", "grant_id", default=None, help="A grant id (a listed prefix is enough).")
@click.option("--reason", default=None, help="Why (audited on each approval).")
@click.option("--approver", default=None, help="Approver id (default: OS user@host).")
@click.option("--yes", is_flag=True, help="Approve the listed proposals without asking.")
@db_option
def batch(
    rule_name: str | None, grant_id: str | None, reason: str | None, approver: str | None,
    yes: bool, db_url: str | None,
) -> None:  # fmt: skip
    """List the pending proposals a rule or grant matches, then approve them.

    Each is approved as `proposals approve` would (the approval policy applies to each), up to
    100 in one write; one decided meanwhile is reported and left alone. Quorum proposals are
    not listed. Without a terminal the list is only shown unless --yes is given.
    """
    from supervisor.ledger.errors import LedgerError
    from supervisor.ledger.models import ProposalStatus
    from supervisor.services.templates import pending_matching_grant, pending_matching_rule

    if (rule_name is None) == (grant_id is None):
        raise BatchTemplateMissing(
            "give exactly one of --rule NAME and --grant ID",
            hint="`supervisor policy show` lists the rules, `supervisor grants list` the grants.",
        )
    approver_id, context = _approver(approver)
    with open_recovered(db_url) as ledger:
        pending = ledger.list(status=ProposalStatus.PENDING, limit=1000).items
        if rule_name is not None:
            matched = pending_matching_rule(ledger.policy, rule_name, pending)
            template = f"rule {rule_name}"
        else:
            grant = ledger.grant(resolve_id(ledger.repository, "grant", grant_id or ""))
            matched = pending_matching_grant(grant, pending)
            template = f"grant {grant.grant_id}"
        echo_line(f"{len(matched)} pending proposal(s) match {template}:")
        for proposal in matched:
            echo_line(f"  {proposal.proposal_id}  {proposal.tool_name}  agent {proposal.owner}  "
                      f"{proposal.arguments}")  # fmt: skip
        if not matched:
            return
        if not yes:
            if not click.get_text_stream("stdin").isatty():
                echo_line("Nothing approved: pass --yes to approve them without a terminal.")
                return
            if not click.confirm(f"Approve these {len(matched)}?", default=False):
                echo_line("Nothing approved.")
                return
        failed = 0
        for start in range(0, len(matched), _PER_WRITE):
            chunk = [proposal.proposal_id for proposal in matched[start : start + _PER_WRITE]]
            outcomes = ledger.approve_many(chunk, approver_id, reason, context=context, via="cli")
            for proposal_id, outcome in zip(chunk, outcomes, strict=True):
                if isinstance(outcome, LedgerError):
                    failed += 1
                    echo_line(f"not approved {proposal_id}: [{outcome.code}] {outcome.message}")
                else:
                    echo_line(f"approved {proposal_id}")
    if failed:
        raise SystemExit(1)
