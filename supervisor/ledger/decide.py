"""The stored policy's rules and grants deciding a call, and the grants themselves.

:meth:`RulesMixin._rule_outcome` runs inside the write transaction that records the proposal,
so the policy version and the grants it reads are the ones in force when the call is recorded:
a policy applied, or a grant revoked, in a transaction that committed first is obeyed. A
decision by a rule or grant is recorded like a person's (an ``approve`` or ``reject`` audit
record whose actor is ``rule:<name>`` or ``grant:<id>``, with the policy version), so nothing
runs without a record of why.

A stored policy this release cannot read decides nothing: every call is asked (a deny rule is
not silently dropped for an allow either, since a person then decides), and the operator sees
why in the proposal's reason.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from supervisor.ledger.base import LedgerBase
from supervisor.ledger.errors import (
    GrantNotFound,
    GrantRefused,
    PolicyInvalid,
    QuorumVoteRepeated,
)
from supervisor.ledger.grants import (
    GRANT_CREATE,
    GRANT_REVOKE,
    GRANT_SUBJECT_PREFIX,
    MAX_GRANT_SECONDS,
    Grant,
    target_hash,
)
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.models import (
    ApproverContext,
    Proposal,
    ProposalStatus,
    QuorumVote,
    Via,
)
from supervisor.ledger.trail import quorum_person
from supervisor.rules.evaluate import Decision
from supervisor.rules.grants import check_patterns
from supervisor.rules.model import CallFacts
from supervisor.store.repository import LedgerTx

_S = ProposalStatus


@dataclass(frozen=True)
class RuleOutcome:
    """What the stored policy decided about one call.

    Attributes:
        decision: The rules' verdict (or the tool's default); ``allow`` also when a grant
            allowed an ``ask``.
        policy_version: The version read (0: the ledger has no policy).
        grant: The grant that allowed it, if one did.
        unreadable: The stored policy could not be read, so a person decides (the decision's
            reason says why).
    """

    decision: Decision
    policy_version: int
    grant: Grant | None = None
    unreadable: bool = False

    @property
    def note(self) -> str | None:
        """What the operator is told about an asked call beyond the tool's own reason."""
        if self.unreadable:
            return self.decision.reason
        if self.decision.rule is not None:
            return f"rule {self.decision.rule}: {self.decision.reason}"
        return None

    @property
    def decided_by_rule(self) -> str | None:
        """``rule:<name>`` or ``grant:<id>`` when the policy decided; ``None`` when a person
        must (``ask``) or the tool's default allowed a read-only call."""
        if self.grant is not None:
            return GRANT_SUBJECT_PREFIX + self.grant.grant_id
        if self.decision.rule is None or self.decision.verdict == "ask":
            return None
        return f"rule:{self.decision.rule}"


class RulesMixin(LedgerBase):
    """Rule evaluation for proposals and the grant operations."""

    def _rule_outcome(
        self, tx: LedgerTx, call: CallFacts, *, schema_hash: str, grantable: bool, now: datetime
    ) -> RuleOutcome:
        """The stored policy's decision for ``call`` (read in ``tx``), grants included."""
        if grantable:
            tx.probe_grants(call.tool, now)
        try:
            policy, version = self._policy_in_force(tx)
        except PolicyInvalid as error:
            reason = f"asked: the stored policy cannot be read ({error.message})"
            return RuleOutcome(Decision("ask", None, reason[:500]), 0, unreadable=True)
        decision = policy.ruleset.evaluate(call)
        if decision.verdict != "ask" or decision.approvals > 1 or not grantable:
            return RuleOutcome(decision, version)
        grant = self._matching_grant(tx, call, schema_hash=schema_hash, now=now)
        if grant is None:
            return RuleOutcome(decision, version)
        allowed = Decision("allow", None, grant.reason or "allowed by a grant")
        return RuleOutcome(allowed, version, grant)

    def _matching_grant(
        self, tx: LedgerTx, call: CallFacts, *, schema_hash: str, now: datetime
    ) -> Grant | None:
        """The oldest live grant that allows ``call``; a grant for another schema of the tool
        dies here (revoked, audited): it was made for a contract that no longer exists."""
        found: Grant | None = None
        for grant in reversed(tx.grants(tool_name=call.tool, live_at=now)):
            if grant.schema_hash != schema_hash:
                self._revoke_grant_in_tx(tx, grant, now, "schema", "the tool's schema changed")
                continue
            if found is not None or grant.uses >= grant.max_uses:
                continue
            if not grant.scope.covers(tool=call.tool, schema_hash=schema_hash, target=call.target,
                                      agent=call.agent, arguments=call.arguments):  # fmt: skip
                continue
            if grant.computed_hash() != grant.document_hash:
                continue  # a row rewritten outside the ledger allows nothing
            if tx.grant_record_hash(grant.grant_id) != grant.document_hash:
                continue  # no audit record made this grant
            found = grant
        return found

    def decide_call(self, call: CallFacts, *, schema_hash: str, grantable: bool) -> RuleOutcome:
        """What the stored policy would decide for ``call`` now, without recording anything.

        The runtime asks this for calls it would otherwise run unrecorded (read-only tools,
        browser actions the worker's own policy allows); whatever is not a plain allow is then
        proposed, and :meth:`propose` decides again in its own transaction.
        """
        with self.repository.read() as tx:
            return self._rule_outcome(
                tx, call, schema_hash=schema_hash, grantable=grantable, now=self._now()
            )

    def _as_decided(self, proposal: Proposal, outcome: RuleOutcome, *, grantable: bool) -> Proposal:
        """``proposal`` as the policy's ``outcome`` leaves it (pending unless a rule decided)."""
        decision = outcome.decision
        update: dict[str, Any] = {
            "grantable": grantable,
            "policy_version": outcome.policy_version or None,
        }
        by = outcome.decided_by_rule
        if by is None:
            update["approvals_required"] = decision.approvals
            if outcome.note is not None:  # the operator sees which rule asked, and why
                update["policy_reason"] = f"{proposal.policy_reason} [{outcome.note}]".strip()
            return proposal.model_copy(update=update)
        status = _S.APPROVED if decision.verdict == "allow" else _S.REJECTED
        update.update(
            status=status, decided_at=proposal.created_at, approver_id=by,
            approver_context=ApproverContext.current("policy"), decision_reason=decision.reason,
            decided_by_rule=by,
        )  # fmt: skip
        return proposal.model_copy(update=update)

    def _audit_rule_decision(
        self, tx: LedgerTx, proposal: Proposal, outcome: RuleOutcome, now: datetime
    ) -> None:
        """The policy's decision, audited like a person's; a grant's use is counted with it."""
        assert proposal.decided_by_rule is not None and proposal.approver_context is not None
        if outcome.grant is not None and not tx.use_grant(outcome.grant.grant_id, now):
            raise AssertionError("a grant matched in this transaction could not be used")
        action = "approve" if proposal.status is _S.APPROVED else "reject"
        payload = self._decision_payload(
            proposal.model_copy(update={"status": _S.PENDING}), to_status=proposal.status,
            approver_id=proposal.decided_by_rule, reason=proposal.decision_reason,
            context=proposal.approver_context, identity=EnvironmentIdentity.current(),
            policy_version=outcome.policy_version,
        )  # fmt: skip
        payload["decided_by"] = proposal.decided_by
        if outcome.grant is not None:
            payload["grant_id"] = outcome.grant.grant_id
            payload["grant_use"] = outcome.grant.uses + 1
        tx.append_audit(
            at=now, actor=proposal.decided_by_rule, action=action,
            subject=proposal.proposal_id, payload=payload,
        )  # fmt: skip

    @staticmethod
    def _quorum_short(proposal: Proposal, identity: EnvironmentIdentity) -> bool:
        """True when this approval is a vote that does not complete the proposal's quorum.

        Approvers are distinct OS users: the same user on another host is the same approver.

        Raises:
            QuorumVoteRepeated: This OS user already approved it.
        """
        if proposal.approvals_required <= 1:
            return False
        if any(quorum_person(vote.identity) == quorum_person(str(identity))
               for vote in proposal.approvals):  # fmt: skip
            raise QuorumVoteRepeated(proposal.proposal_id, str(identity), proposal.quorum or "")
        return len(proposal.approvals) + 1 < proposal.approvals_required

    def _vote(
        self, tx: LedgerTx, current: Proposal, identity: EnvironmentIdentity, approver_id: str,
        reason: str | None, context: ApproverContext, now: datetime, policy_version: int | None,
    ) -> Proposal:  # fmt: skip
        """Record one approval of a quorum proposal that stays pending (``approve_vote``)."""
        votes = (*current.approvals, QuorumVote(identity=str(identity), approver_id=approver_id,
                                                at=now))  # fmt: skip
        changed = tx.update_proposal_returning(
            current.proposal_id, expect_status=_S.PENDING,
            values={"approvals": votes, "updated_at": now},
        )  # fmt: skip
        if changed is None:
            raise self._state_error(tx, self._load(tx, current.proposal_id), "approved")
        payload = self._decision_payload(
            current, to_status=_S.PENDING, approver_id=approver_id, reason=reason,
            context=context, identity=identity, policy_version=policy_version,
        )  # fmt: skip
        payload["quorum"] = f"{len(votes)} of {current.approvals_required}"
        tx.append_audit(at=now, actor=approver_id, action="approve_vote",
                        subject=current.proposal_id, payload=payload)  # fmt: skip
        return changed

    # -- grants -----------------------------------------------------------------------------

    def _create_grant(
        self,
        tx: LedgerTx,
        proposal: Proposal,
        *,
        approver_id: str,
        identity: EnvironmentIdentity,
        patterns: Mapping[str, Any],
        seconds: float,
        max_uses: int,
        any_agent: bool,
        reason: str | None,
        now: datetime,
    ) -> Grant:
        check_grantable(proposal, seconds=seconds, max_uses=max_uses)
        grant = Grant(
            grant_id=uuid.uuid4().hex, tool_name=proposal.tool_name,
            schema_hash=proposal.tool_schema_hash,
            target_hash=target_hash(proposal.execution_target),
            owner="" if any_agent else proposal.owner,
            arguments=check_patterns(patterns, proposal.arguments),
            created_by=str(identity), approver_id=approver_id, created_at=now,
            expires_at=now + timedelta(seconds=seconds), max_uses=max_uses,
            source_proposal_id=proposal.proposal_id, reason=reason,
        )  # fmt: skip
        grant = grant.model_copy(update={"document_hash": grant.computed_hash()})
        tx.insert_grant(grant)
        tx.append_audit(
            at=now, actor=approver_id, action=GRANT_CREATE,
            subject=GRANT_SUBJECT_PREFIX + grant.grant_id,
            payload={**grant.document(), "document_hash": grant.document_hash,
                     "reason": reason, "identity": str(identity)},
        )  # fmt: skip
        return grant

    def _revoke_grant_in_tx(
        self, tx: LedgerTx, grant: Grant, now: datetime, by: str, reason: str
    ) -> bool:
        if not tx.revoke_grant(grant.grant_id, now, by, reason):
            return False
        tx.append_audit(
            at=now, actor=by, action=GRANT_REVOKE, subject=GRANT_SUBJECT_PREFIX + grant.grant_id,
            payload={"reason": reason, "uses": grant.uses,
                     "identity": str(EnvironmentIdentity.current())},
        )  # fmt: skip
        return True

    def revoke_grant(
        self, grant_id: str, by: str, reason: str = "revoked", *, via: Via = "sdk"
    ) -> Grant:
        """Revoke a grant at once: no call recorded after this commits is allowed by it.

        Raises:
            GrantNotFound: No grant has that id.
        """
        with self.repository.write() as tx:
            grant = _load_grant(tx, grant_id)
            self._revoke_grant_in_tx(tx, grant, self._now(), by, f"{reason} (via {via})")
            return _load_grant(tx, grant_id)

    def revoke_stale_grants(
        self, tool_name: str, schema_hash: str, execution_target: dict[str, Any], by: str,
        reason: str,
    ) -> list[Grant]:  # fmt: skip
        """Revoke the live grants of ``tool_name`` made for another schema or target (a tool
        whose contract changed, e.g. an MCP server's); returns the ones revoked."""
        wanted = target_hash(execution_target)
        revoked = []
        with self.repository.write() as tx:
            now = self._now()
            for grant in tx.grants(tool_name=tool_name, live_at=now):
                if grant.schema_hash == schema_hash and grant.target_hash == wanted:
                    continue
                if self._revoke_grant_in_tx(tx, grant, now, by, reason):
                    revoked.append(grant)
        return revoked

    def grants(self, *, live_only: bool = False, tool_name: str | None = None) -> list[Grant]:
        """Grants, newest first (``live_only``: neither revoked nor expired)."""
        with self.repository.read() as tx:
            return tx.grants(tool_name=tool_name, live_at=self._now() if live_only else None)

    def grant(self, grant_id: str) -> Grant:
        """One grant.

        Raises:
            GrantNotFound: No grant has that id.
        """
        with self.repository.read() as tx:
            return _load_grant(tx, grant_id)


def check_grantable(proposal: Proposal, *, seconds: float, max_uses: int) -> None:
    """Refuse a grant from ``proposal`` before anything changes.

    Raises:
        GrantRefused: A never-grantable tool, a quorum proposal (a grant would stand in for
            its approvers), or a lifetime or use cap out of range.
    """
    why = None
    if not proposal.grantable:
        why = (f"{proposal.tool_name} is marked never-grantable (secret reads, egress): "
               "approve each call on its own")  # fmt: skip
    elif proposal.approvals_required > 1:
        why = f"it needs {proposal.approvals_required} approvers; a grant cannot stand in for them"
    elif not 0 < seconds <= MAX_GRANT_SECONDS or max_uses < 1:
        why = (f"a grant lasts 1 s to {MAX_GRANT_SECONDS / 86400:.0f} days and allows at least "
               "one use")  # fmt: skip
    if why is not None:
        raise GrantRefused(proposal.proposal_id, why)


def _load_grant(tx: LedgerTx, grant_id: str) -> Grant:
    grant = tx.grant(grant_id)
    if grant is None:
        raise GrantNotFound(grant_id)
    return grant
