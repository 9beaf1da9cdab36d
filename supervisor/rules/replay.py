"""Replay: what a candidate rule set would have done to the calls the ledger recorded.

Each decided proposal is decided again by the candidate (:meth:`RuleSet.evaluate`) and set
beside what really happened to it. The report leads with the calls that matter most: every call
a human **rejected** (or later reconciled as **failed**) that the candidate would **allow**.

How the history is read:

* Pending proposals are skipped (nobody has decided them yet).
* An edit chain counts once. The rule would have seen the model's own call (the chain's first
  link), and the outcome is the live end's (see :mod:`supervisor.ledger.chain`). A human who
  had to edit a call before approving it did not accept it as proposed: a candidate that would
  allow the original is listed (``edited_allowed``), and :mod:`supervisor.rules.suggest` never
  suggests such a rule.
* What the human did: ``approved`` (approved, executing, executed, failed,
  needs_reconciliation), ``rejected``, or ``undecided`` (expired, cancelled, or an edit whose
  successor is gone). Approved and rejected calls were prompts a human answered; a call the
  candidate allows or denies was a prompt it would have saved.
* A call a human approved and later **reconciled as failed** is a bad outcome, flagged like a
  rejection.
* A call decided by a rule (``decided_by_rule``) is not a human decision: it is counted on its
  own and never as a prompt.
"""

from __future__ import annotations

import gc
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NamedTuple

from supervisor.canonical import canonical_json
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.rules.evaluate import Decision, RuleSet
from supervisor.rules.model import VERDICTS, CallFacts, Verdict

HumanOutcome = Literal["approved", "rejected", "undecided", "by_rule"]
Flag = Literal["rejected", "reconciled_failed", "edited", "approved"]

_S = ProposalStatus
_APPROVED = frozenset({"approved", "executing", "executed", "failed", "needs_reconciliation"})
_UNDECIDED = frozenset({"expired", "cancelled", "superseded"})
#: Edit chains longer than this are not followed further (as in ``ledger.chain``).
_MAX_CHAIN = 1_000


class RecordedCall(NamedTuple):
    """One recorded proposal as replay reads it (a tuple: 100k of them are built per replay).

    ``arguments_json``, ``target_json`` and ``domains_json`` are the canonical JSON the ledger
    stores: equal calls have equal text, so replay decides each distinct call once.
    ``reconciled_failed`` holds who reconciled the call as failed and why, when that happened.
    """

    proposal_id: str
    tool: str
    arguments_json: str
    target_json: str
    domains_json: str
    agent: str
    user: str | None
    status: str
    created_at: datetime
    decided_at: datetime | None = None
    approver_id: str | None = None
    decision_reason: str | None = None
    supersedes_id: str | None = None
    superseded_by_id: str | None = None
    decided_by_rule: str | None = None
    policy_version: int | None = None
    reconciled_failed: tuple[str | None, str | None] | None = None

    @property
    def key(self) -> tuple[str, str, str, str, str, str | None]:
        """What a rule can see of the call, as text (equal keys get equal decisions)."""
        return (self.tool, self.arguments_json, self.target_json, self.domains_json,
                self.agent, self.user)  # fmt: skip

    def arguments(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.arguments_json)
        return value

    def facts(self) -> CallFacts:
        """The call as rules see it (a proposal's tool always asked: ``read_only=False``)."""
        return CallFacts(
            tool=self.tool, arguments=self.arguments(),
            domains=tuple(json.loads(self.domains_json)), agent=self.agent, user=self.user,
            target=json.loads(self.target_json), read_only=False,
        )  # fmt: skip


def call_facts_of(proposal: Proposal) -> CallFacts:
    """The call a proposal records, as rules see it.

    A proposal exists because its tool asked for approval, so it is never the read-only default.
    """
    return CallFacts(
        tool=proposal.tool_name, arguments=proposal.arguments, domains=tuple(proposal.domains),
        agent=proposal.owner, user=proposal.user, target=proposal.execution_target,
        read_only=False,
    )  # fmt: skip


def recorded_call_of(
    proposal: Proposal, *, reconciled_failed: tuple[str | None, str | None] | None = None
) -> RecordedCall:
    """A proposal (from ``ApprovalLedger.get`` or ``list``) as replay reads it."""
    return RecordedCall(
        proposal_id=proposal.proposal_id, tool=proposal.tool_name,
        arguments_json=canonical_json(proposal.arguments),
        target_json=canonical_json(proposal.execution_target),
        domains_json=canonical_json(list(proposal.domains)), agent=proposal.owner,
        user=proposal.user, status=proposal.status.value, created_at=proposal.created_at,
        decided_at=proposal.decided_at, approver_id=proposal.approver_id,
        decision_reason=proposal.decision_reason, supersedes_id=proposal.supersedes_id,
        superseded_by_id=proposal.superseded_by_id,
        decided_by_rule=proposal.decided_by_rule, policy_version=proposal.policy_version,
        reconciled_failed=reconciled_failed,
    )  # fmt: skip


class DecidedCall(NamedTuple):
    """One decided call of the history: what a rule would have seen and what happened.

    ``call`` is the model's own call (an edit chain's first link), ``final`` the link that
    stands for it now (the call itself when never edited).
    """

    call: RecordedCall
    final: RecordedCall
    outcome: HumanOutcome
    edited: bool = False

    @property
    def reconciled_failed(self) -> bool:
        return self.final.reconciled_failed is not None

    @property
    def bad(self) -> bool:
        """A human said no: rejected, reconciled as failed, or had to edit it first."""
        return self.outcome == "rejected" or self.reconciled_failed or self.edited

    @property
    def prompt(self) -> bool:
        """A human answered a prompt for it."""
        return self.outcome in ("approved", "rejected")


def _outcome(final: RecordedCall) -> HumanOutcome:
    if final.decided_by_rule is not None:
        return "by_rule"
    if final.status in _APPROVED:
        return "approved"
    if final.status == "rejected":
        return "rejected"
    return "undecided"


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a history is read or replayed: both build
    hundreds of thousands of small acyclic objects (rows, parsed arguments, decisions), and
    the collections they trigger cost 12-15% of a 100k replay. Plain reference counting still
    frees everything; the collector is restored (if it was on) on the way out."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@gc_paused()
def decided_calls(calls: list[RecordedCall]) -> list[DecidedCall]:
    """The decided calls among ``calls`` (oldest first), each edit chain once, pending skipped.

    Links are followed only when both sides agree (``superseded_by_id`` one way,
    ``supersedes_id`` back), as :mod:`supervisor.ledger.chain` does.
    """
    by_id = {c.proposal_id: c for c in calls if c.supersedes_id or c.superseded_by_id}
    decided: list[DecidedCall] = []
    for call in calls:
        if not (call.supersedes_id or call.superseded_by_id):  # never edited: most calls
            if call.status != "pending":
                decided.append(DecidedCall(call, call, _outcome(call)))
            continue
        successor = by_id.get(call.superseded_by_id or "")
        if (
            call.status == "superseded"
            and successor
            and successor.supersedes_id == call.proposal_id
        ):
            continue  # the chain is counted at its live end
        if call.status == "pending":
            continue
        first, links = call, 0
        while first.supersedes_id and links < _MAX_CHAIN:
            previous = by_id.get(first.supersedes_id)
            if previous is None or previous.superseded_by_id != first.proposal_id:
                break
            first, links = previous, links + 1
        outcome = _outcome(call)
        decided.append(
            DecidedCall(first, call, outcome, edited=links > 0 and outcome == "approved")
        )
    return decided


@dataclass(frozen=True)
class Flagged:
    """A call where the candidate and the human disagree."""

    proposal_id: str
    tool: str
    agent: str
    flag: Flag
    verdict: Verdict
    rule: str | None
    rule_reason: str
    by: str | None
    reason: str | None
    at: datetime | None
    arguments: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "proposal_id": self.proposal_id, "tool": self.tool, "agent": self.agent,
            "human": self.flag, "verdict": self.verdict, "rule": self.rule,
            "rule_reason": self.rule_reason, "by": self.by, "reason": self.reason,
            "at": self.at.isoformat() if self.at else None, "arguments": self.arguments,
        }  # fmt: skip


def _flagged(decided: DecidedCall, decision: Decision, flag: Flag) -> Flagged:
    final = decided.final
    by, reason, at = final.approver_id, final.decision_reason, final.decided_at
    if flag == "reconciled_failed" and final.reconciled_failed is not None:
        by, reason = final.reconciled_failed
    return Flagged(
        proposal_id=final.proposal_id, tool=decided.call.tool, agent=decided.call.agent,
        flag=flag, verdict=decision.verdict, rule=decision.rule, rule_reason=decision.reason,
        by=by, reason=reason, at=at, arguments=decided.call.arguments(),
    )  # fmt: skip


@dataclass(frozen=True)
class Bucket:
    """The candidate's verdicts for the calls proposed in one hour or day."""

    start: datetime
    allow: int = 0
    ask: int = 0
    deny: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start.isoformat(), "allow": self.allow, "ask": self.ask,
                "deny": self.deny}  # fmt: skip


@dataclass
class ReplayReport:
    """What the candidate would have done to the decided calls of the history.

    Attributes:
        replayed: Decided calls replayed (edit chains once).
        verdicts: The candidate's verdicts over them.
        human: What happened: approved, rejected, undecided (expired, cancelled), by_rule
            (decided by a rule of the policy in force), plus reconciled_failed and edited
            (both also counted as approved).
        prompts: Calls a human answered (approved or rejected).
        prompts_saved: Of those, the ones the candidate would allow or deny without asking.
        rejected_allowed: Rejected or reconciled-failed calls the candidate would allow.
        edited_allowed: Calls a human edited before approving that it would allow unedited.
        approved_denied: Calls a human approved that it would deny.
        rules: Per candidate rule, the calls it decided and the prompts it saved.
        unit, timeline: The verdict mix per hour (a history of up to two days) or per day.
    """

    replayed: int = 0
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    human: dict[str, int] = field(default_factory=dict)
    prompts: int = 0
    prompts_saved: int = 0
    rejected_allowed: list[Flagged] = field(default_factory=list)
    edited_allowed: list[Flagged] = field(default_factory=list)
    approved_denied: list[Flagged] = field(default_factory=list)
    rules: dict[str, dict[str, int]] = field(default_factory=dict)
    unit: Literal["hour", "day"] = "hour"
    timeline: list[Bucket] = field(default_factory=list)
    first_at: datetime | None = None
    last_at: datetime | None = None

    @property
    def safe(self) -> bool:
        """No call a human rejected (or reconciled as failed) would be allowed."""
        return not self.rejected_allowed

    @property
    def saved_share(self) -> float:
        return self.prompts_saved / self.prompts if self.prompts else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "safe": self.safe, "replayed": self.replayed, "verdicts": self.verdicts,
            "human": self.human, "prompts": self.prompts, "prompts_saved": self.prompts_saved,
            "rejected_allowed": [flag.to_json() for flag in self.rejected_allowed],
            "edited_allowed": [flag.to_json() for flag in self.edited_allowed],
            "approved_denied": [flag.to_json() for flag in self.approved_denied],
            "rules": self.rules, "unit": self.unit,
            "timeline": [bucket.to_json() for bucket in self.timeline],
            "first_at": self.first_at.isoformat() if self.first_at else None,
            "last_at": self.last_at.isoformat() if self.last_at else None,
        }  # fmt: skip


@gc_paused()
def replay(rules: RuleSet, history: list[DecidedCall]) -> ReplayReport:
    """Decide every call of ``history`` with ``rules`` and compare with what happened.

    Each distinct call (tool, arguments, target, domains, agent, user) is evaluated once.
    """
    report = ReplayReport(replayed=len(history))
    cache: dict[tuple[str, str, str, str, str, str | None], Decision] = {}
    parsed: dict[str, Any] = {}  # target and domain JSON: few distinct texts
    human: Counter[str] = Counter()
    per_rule: dict[str, Counter[str]] = {}
    mix: dict[int, Counter[str]] = {}  # bucket number (hours or days since the epoch)
    if history:
        report.first_at = min(item.call.created_at for item in history)
        report.last_at = max(item.call.created_at for item in history)
        if report.last_at - report.first_at > timedelta(days=2):
            report.unit = "day"
    width = 86400 if report.unit == "day" else 3600
    verdicts = report.verdicts
    for item in history:
        call = item.call
        key = call.key
        decision = cache.get(key)
        if decision is None:
            decision = cache[key] = rules.evaluate(_facts(call, parsed))
        verdict = decision.verdict
        verdicts[verdict] += 1
        outcome = item.outcome
        human[outcome] += 1
        reconciled, edited = item.final.reconciled_failed is not None, item.edited
        prompt = outcome == "approved" or outcome == "rejected"
        saved = prompt and verdict != "ask"
        report.prompts += prompt
        report.prompts_saved += saved
        # get-then-create, not setdefault(key, Counter()): that builds a Counter per call.
        if decision.rule is not None:
            counts = per_rule.get(decision.rule)
            if counts is None:
                counts = per_rule[decision.rule] = Counter()
            counts["decided"] += 1
            counts["prompts_saved"] += saved
        bucket = int(call.created_at.timestamp()) // width
        counts = mix.get(bucket)
        if counts is None:
            counts = mix[bucket] = Counter()
        counts[verdict] += 1
        if reconciled or edited:
            human["reconciled_failed"] += reconciled
            human["edited"] += edited
        if verdict == "allow" and reconciled:
            report.rejected_allowed.append(_flagged(item, decision, "reconciled_failed"))
        elif verdict == "allow" and outcome == "rejected":
            report.rejected_allowed.append(_flagged(item, decision, "rejected"))
        elif verdict == "allow" and edited:
            report.edited_allowed.append(_flagged(item, decision, "edited"))
        elif verdict == "deny" and outcome == "approved":
            report.approved_denied.append(_flagged(item, decision, "approved"))
    for name in ("approved", "rejected", "undecided", "by_rule", "reconciled_failed", "edited"):
        report.human[name] = human[name]
    report.rules = {
        rule.name: {"decided": per_rule[rule.name]["decided"],
                    "prompts_saved": per_rule[rule.name]["prompts_saved"]}
        for rule in rules.rules if rule.name in per_rule
    }  # fmt: skip
    report.timeline = _timeline(mix, width)
    return report


def _facts(call: RecordedCall, parsed: dict[str, Any]) -> CallFacts:
    """``call.facts()``, with the target and domains parsed once per distinct text."""
    target = parsed.get(call.target_json)
    if target is None:
        target = parsed[call.target_json] = json.loads(call.target_json)
    domains = parsed.get(call.domains_json)
    if domains is None:
        domains = parsed[call.domains_json] = tuple(json.loads(call.domains_json))
    return CallFacts(
        tool=call.tool, arguments=call.arguments(), domains=domains, agent=call.agent,
        user=call.user, target=target, read_only=False,
    )  # fmt: skip


def _timeline(mix: dict[int, Counter[str]], width: int) -> list[Bucket]:
    """One bucket per hour or day (``width`` seconds) from the first call to the last, empty
    ones included."""
    if not mix:
        return []
    buckets: list[Bucket] = []
    for number in range(min(mix), max(mix) + 1):
        counts = mix.get(number, Counter())
        start = datetime.fromtimestamp(number * width, UTC)
        buckets.append(Bucket(start, counts["allow"], counts["ask"], counts["deny"]))
    return buckets
