"""One ``approval <tool>`` span per proposal: the wait for a human's (or a rule's) decision.

The span starts when the call was proposed and ends when its decision became final (the
decision time; the expiry for an expired one; the export time while pending). It is a child of
the run's ``invoke_agent`` span; the ``execute_tool`` span of an approved call comes after it
and links to it. Attributes:

* ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.agent.id``, ``gen_ai.conversation.id``;
* ``supervisor.proposal.id``, ``supervisor.proposal.status`` (the ledger status now),
  ``supervisor.proposal.args_hash`` (never the arguments), ``supervisor.proposal.supersedes`` /
  ``superseded_by`` for edits;
* ``supervisor.approval.decision``: ``approved``, ``rejected``, ``expired``, ``cancelled``,
  ``superseded`` (edited by a human) or ``pending``;
* ``supervisor.approval.decided_by``: the approver label, or ``rule R (policy vN)`` /
  ``grant G (policy vN)``; ``supervisor.approval.rule`` / ``grant``, ``supervisor.policy.version``,
  ``supervisor.approval.via`` (sdk, tui, cli, policy), ``supervisor.approval.identity``
  (``user@host`` of the deciding process), ``supervisor.approval.reason``;
* ``supervisor.approval.wait_ms``: from proposed to decided, in milliseconds;
* ``supervisor.approval.approvals_required`` / ``approvals`` for quorum rules.

Span events: ``proposed``, one ``vote`` per quorum approval, ``approved`` for an approval that
later expired unclaimed, and the decision itself. Status ERROR (message ``<decision>: the call
did not run``) for rejected, expired and cancelled calls, OK for approved ones, UNSET otherwise.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from supervisor.analysis.approvals import NOT_RUN_DECISIONS, ApprovalFacts
from supervisor.analysis.otlp_spans import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    attributes,
    hex_id,
    nanos,
    span,
)


def approval_span_id(key: str, facts: ApprovalFacts) -> str:
    """The span id of ``facts``'s approval span in the trace keyed ``key``."""
    return hex_id("approval", key, facts.proposal_id, digits=16)


def _event(name: str, moment: datetime, values: dict[str, Any]) -> dict[str, Any]:
    return {"timeUnixNano": nanos(moment), "name": name, "attributes": attributes(values)}


def _span_events(facts: ApprovalFacts, now: datetime) -> list[dict[str, Any]]:
    decision = facts.decision(now)
    expires = {"supervisor.approval.expires_at": facts.expires_at.isoformat()}
    events = [_event("proposed", facts.created_at, expires)]
    for vote in facts.votes:
        voter = {
            "supervisor.approval.identity": vote.identity,
            "supervisor.approval.decided_by": vote.approver_id,
        }
        events.append(_event("vote", vote.at, voter))
    if decision == "expired" and facts.decided_at is not None:  # approved, never claimed
        approver = {"supervisor.approval.decided_by": facts.decided_by}
        events.append(_event("approved", facts.decided_at, approver))
    if decision != "pending":
        by = None if decision == "expired" else facts.decided_by
        events.append(_event(decision, facts.decided_moment(now),
                             {"supervisor.approval.decided_by": by}))  # fmt: skip
    return events


def approval_span(
    trace_id: str, root_id: str, key: str, facts: ApprovalFacts, now: datetime
) -> dict[str, Any]:
    """The approval span of ``facts`` (see the module docstring)."""
    decision = facts.decision(now)
    end = facts.decided_moment(now)
    wait_ms = (end - facts.created_at) // timedelta(milliseconds=1)
    quorum = facts.approvals_required > 1
    values: dict[str, Any] = {
        "gen_ai.tool.name": facts.tool_name,
        "gen_ai.tool.call.id": facts.call_id,
        "gen_ai.agent.id": facts.owner or None,
        "gen_ai.conversation.id": facts.thread_id,
        "supervisor.proposal.id": facts.proposal_id,
        "supervisor.proposal.status": facts.status.value,
        "supervisor.proposal.args_hash": facts.args_hash,
        "supervisor.proposal.supersedes": facts.supersedes_id,
        "supervisor.proposal.superseded_by": facts.superseded_by_id,
        "supervisor.approval.decision": decision,
        "supervisor.approval.decided_by": facts.decided_by if decision != "pending" else None,
        "supervisor.approval.rule": facts.rule,
        "supervisor.approval.grant": facts.grant,
        "supervisor.policy.version": facts.policy_version,
        "supervisor.approval.via": facts.via,
        "supervisor.approval.identity": facts.approver_identity,
        "supervisor.approval.reason": facts.reason or None,
        "supervisor.approval.wait_ms": wait_ms,
        "supervisor.approval.approvals_required": facts.approvals_required if quorum else None,
        "supervisor.approval.approvals": len(facts.votes) if quorum else None,
    }
    if decision in NOT_RUN_DECISIONS:
        status: tuple[int, str | None] = (STATUS_ERROR, f"{decision}: the call did not run")
    elif decision == "approved":
        status = (STATUS_OK, None)
    else:
        status = (STATUS_UNSET, None)
    return span(
        trace_id, approval_span_id(key, facts), root_id, f"approval {facts.tool_name}",
        facts.created_at, end, values, status=status, events=_span_events(facts, now),
    )  # fmt: skip
