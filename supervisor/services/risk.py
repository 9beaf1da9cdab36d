"""A proposal's risk as every pane shows it: one rule, so the inbox and the detail agree.

A proposal is high-risk when one of its domains is in the supervisor's high-risk set; that
outranks whatever risk the proposing agent recorded. Otherwise its recorded risk shows, or ``-``.
"""

from __future__ import annotations

from collections.abc import Collection

from supervisor.ledger.models import Proposal


def is_high_risk(proposal: Proposal, high_risk_domains: Collection[str]) -> bool:
    """True when one of the proposal's domains is marked high-risk."""
    return any(domain in high_risk_domains for domain in proposal.domains)


def risk_label(proposal: Proposal, high_risk_domains: Collection[str]) -> str:
    """``high`` for a high-risk domain, else the recorded risk, else ``-``."""
    if is_high_risk(proposal, high_risk_domains):
        return "high"
    return proposal.risk or "-"
