"""The approval ledger: durable proposals and the decisions on them (DESIGN §4).

Every transition is one conditional UPDATE checked by its rowcount, in the same transaction as
its audit record; writers are serialised across processes and hosts by the repository, so two
approvers or two resumers racing for one proposal produce exactly one winner and one precise
error naming the winner and the time.
"""

from __future__ import annotations

import base64
import builtins
import json
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from supervisor.canonical import args_hash as compute_args_hash
from supervisor.canonical import normalise
from supervisor.ledger.amend import AmendMixin
from supervisor.ledger.base import LedgerBase, validated_arguments
from supervisor.ledger.chain import live_end
from supervisor.ledger.decide import RulesMixin, check_grantable
from supervisor.ledger.errors import (
    ApprovalExpired,
    LedgerBusy,
    LedgerError,
    LedgerUnavailable,
)
from supervisor.ledger.execution import ExecutionMixin
from supervisor.ledger.feed import FeedMixin
from supervisor.ledger.grants import DEFAULT_GRANT_SECONDS, DEFAULT_GRANT_USES, Grant
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.leases import LeaseServiceMixin
from supervisor.ledger.models import (
    SDK_RUNTIME,
    ApproverContext,
    Checkpoint,
    Proposal,
    ProposalPage,
    ProposalStatus,
    TraceEvent,
    Via,
)
from supervisor.ledger.operators import OperatorsMixin
from supervisor.ledger.policy_versions import PolicyMixin
from supervisor.ledger.reconcile import ReconcileMixin
from supervisor.ledger.registry import RegistryServiceMixin
from supervisor.ledger.runs import RunsServiceMixin
from supervisor.ledger.trail import PENDING_CHANGES
from supervisor.ledger.webhooks import WebhookServiceMixin
from supervisor.outcomes.blobref import BlobRef
from supervisor.rules.grants import check_patterns
from supervisor.rules.model import CallFacts
from supervisor.store.repository import LedgerTx, RowsNotMatched

_S = ProposalStatus


def encode_cursor(created_at: datetime, proposal_id: str) -> str:
    """An opaque keyset cursor for (created_at, id)."""
    raw = json.dumps([created_at.isoformat(), proposal_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """Inverse of :func:`encode_cursor`.

    Raises:
        ValueError: ``cursor`` was not produced by :func:`encode_cursor`.
    """
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, proposal_id = json.loads(base64.urlsafe_b64decode(padded))
        return datetime.fromisoformat(created), str(proposal_id)
    except (ValueError, TypeError) as error:
        raise ValueError(f"Not a proposal list cursor: {cursor!r}") from error


class _Decision(NamedTuple):
    """What a decision is (approve, reject, cancel) and who makes it."""

    action: str
    wanted: str
    from_status: ProposalStatus
    to_status: ProposalStatus
    approver_id: str
    reason: str | None
    context: ApproverContext
    identity: EnvironmentIdentity
    grants: bool


class _Checked(NamedTuple):
    """A decision read and checked, its writes still to send (``_write_decision``)."""

    current: Proposal
    decision: _Decision
    payload: dict[str, Any]
    now: datetime


#: Errors that end a whole write, not one decision in it.
_WHOLE_WRITE_ERRORS = (LedgerBusy, LedgerUnavailable)


class ApprovalLedger(
    AmendMixin,
    ExecutionMixin,
    ReconcileMixin,
    FeedMixin,
    RunsServiceMixin,
    RegistryServiceMixin,
    LeaseServiceMixin,
    PolicyMixin,
    RulesMixin,
    OperatorsMixin,
    WebhookServiceMixin,
    LedgerBase,
):
    """Durable approvals shared by every process that opens the same ledger.

    Args:
        engine_or_repository: An engine (its schema is brought current) or a repository.
        clock: Where time comes from; inject a ``ManualClock`` in tests.
        policy: The approval policy this process expects (see ``LedgerBase``); the stored one
            is enforced either way.
        default_ttl_seconds: Expiry of proposals proposed without an explicit TTL.
    """

    def propose(
        self,
        tool_name: str,
        tool_schema_hash: str,
        arguments: Mapping[str, Any],
        *,
        execution_target: Mapping[str, Any] | None = None,
        policy_reason: str = "",
        owner: str = "",
        user: str | None = None,
        thread_id: str | None = None,
        checkpoint_id: str | None = None,
        call_id: str | None = None,
        domains: Iterable[str] = (),
        ttl_seconds: float | None = None,
        risk: str | None = None,
        read_only: bool = False,
        grantable: bool = True,
        runtime: str | None = None,
        turn_id: str | None = None,
        trace: Callable[[Proposal], Iterable[TraceEvent]] | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> Proposal:
        """Record an exact tool call and let the stored policy decide it, or a person.

        The policy in force is read in the transaction that records the call: a rule that
        allows or denies it, or a live grant that allows it, decides it there and then (the
        proposal is returned ``approved`` or ``rejected``, ``decided_by_rule`` naming the rule
        or grant, with an audited decision like a person's); otherwise it is ``pending``, and
        a quorum rule sets how many distinct approvers it needs.

        Args:
            tool_name: The governed tool's name.
            tool_schema_hash: Hash of the tool's schema (its contract).
            arguments: Arguments after schema validation (JSON data).
            execution_target: Where the call will run (sandbox, browser target, MCP server).
            policy_reason: Why policy requires approval (shown to the approver).
            owner: The requesting agent id.
            user: The end user on whose behalf the agent acts.
            thread_id: The agent thread.
            checkpoint_id: The checkpoint to resume from once decided.
            call_id: The model's tool-call id this proposal answers.
            domains: Policy domains of the tool (for allowlists and filters).
            ttl_seconds: Seconds until expiry; defaults to the ledger's default TTL.
            risk: A free-form risk label.
            read_only: The tool is read-only and deterministic (rules default to allow).
            grantable: False for tools marked never-grantable: no grant may allow the call.
            runtime: Which agent runtime asks: ``claude-code``, ``mcp:<server>`` (the MCP
                gateway), ``acp:<agent>``; by default ``sdk``, this SDK's own agents (their
                MCP tools' calls included: the target says where a call runs).
            turn_id: The assistant turn the call belongs to, where the runtime knows it;
                batch approval never crosses a turn.
            trace: Given the recorded proposal (as returned), the trace events to append in
                the same transaction (redacted as :meth:`append_trace` does): a paused run's
                report of the call commits with it. Called once, under the write lock.
            checkpoint: The checkpoint to resume from (see :meth:`checkpoint_of`), stored in
                the same transaction, before the proposal that names it; ``checkpoint_id``
                defaults to its id.

        Returns:
            The new proposal (pending, or decided by the policy), with canonical arguments and
            their hash.

        Raises:
            CanonicalJSONError: Arguments or target are not JSON data (NaN, Infinity, objects).
            ValueError: ``ttl_seconds`` is not positive.
        """
        if checkpoint is not None:
            if checkpoint_id not in (None, checkpoint.checkpoint_id):
                raise ValueError("checkpoint_id names another checkpoint than checkpoint.")
            checkpoint_id = checkpoint.checkpoint_id
        validated = validated_arguments(arguments)
        target: dict[str, Any] = normalise(dict(execution_target or {}))
        ttl = self.default_ttl_seconds if ttl_seconds is None else ttl_seconds
        if ttl <= 0:
            raise ValueError("ttl_seconds must be positive.")
        now = self._now()
        proposal = Proposal(
            proposal_id=uuid.uuid4().hex,
            tool_name=tool_name,
            tool_schema_hash=tool_schema_hash,
            arguments=validated,
            args_hash=compute_args_hash(tool_name, tool_schema_hash, validated, target),
            execution_target=target,
            policy_reason=policy_reason,
            owner=owner,
            user=user,
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            call_id=call_id,
            domains=tuple(dict.fromkeys(domains)),
            risk=risk,
            status=_S.PENDING,
            created_at=now,
            updated_at=now,
            expires_at=now + timedelta(seconds=ttl),
            runtime=runtime or SDK_RUNTIME,
            turn_id=turn_id,
        )
        facts = CallFacts(
            tool=tool_name, arguments=validated, domains=proposal.domains, agent=owner,
            user=user, target=target, read_only=read_only,
        )  # fmt: skip
        asked = proposal

        def record(late: bool) -> tuple[Proposal, int]:
            with self.repository.write(late_lock=late) as tx:
                outcome = self._rule_outcome(
                    tx, facts, schema_hash=tool_schema_hash, grantable=grantable, now=now
                )
                proposal = self._as_decided(asked, outcome, grantable=grantable)
                if trace is not None:
                    tx.lock_now()  # ``trace`` may not be called twice: only once it will hold
                if checkpoint is not None:
                    tx.insert_checkpoint(checkpoint)
                batch = (
                    [self.redact_trace_event(event) for event in trace(proposal)] if trace else []
                )
                with tx.pipelined(commit=not batch):
                    tx.insert_proposal(proposal)
                    self._audit_proposed(tx, proposal, now, original_ttl_seconds=float(ttl))
                    if proposal.decided_by_rule is not None:
                        self._audit_rule_decision(tx, proposal, outcome, now)
                tx.insert_trace_events(batch)
            return proposal, len(batch)

        proposal, traced = self._late_or_early(record)
        self._traced(traced)
        return proposal

    def wait_decided(self, proposal_id: str, timeout: float) -> Proposal:
        """Block on the change feed until the call's proposal leaves ``pending`` or ``timeout``
        seconds pass; expiry is applied as it falls due.

        An edit does not end the wait: the edited proposal (the live end of the chain) is waited
        on in its turn, and the one returned is the live end (its id differs from
        ``proposal_id`` when the call was edited). Every waiter of a call uses this: the agent
        runtime, the Claude Code hook and the MCP gateway.
        """
        deadline = time.monotonic() + max(timeout, 0.0)
        cursor = self.head()
        while True:
            proposal = live_end(self, proposal_id)
            if proposal.status is not _S.PENDING:
                return proposal
            if proposal.expires_at <= self.clock.now():
                self.expire_due()
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return proposal
            # Only what ends or re-times the live end wakes this wait (writes to other
            # proposals, and their claims and completions, are not even sent to it); anything
            # missed is re-read within the second.
            cursor = self.follow(
                cursor, min(remaining, 1.0), actions=PENDING_CHANGES,
                subjects=(proposal.proposal_id,),
            ).cursor  # fmt: skip

    def stored_result(self, proposal_id: str) -> bytes | None:
        """What a claimed call returned, as recorded with its execution (the result blob), or
        ``None`` when nothing readable was recorded."""
        execution = self.execution(proposal_id)
        if execution is None or not execution.result_ref:
            return None
        try:
            ref = BlobRef.from_result_ref(execution.result_ref)
        except ValueError:
            return None
        blob = self.get_blob(ref.hex)
        return None if blob is None else blob.content

    def get(self, proposal_id: str) -> Proposal:
        """Return one proposal.

        Raises:
            ProposalNotFound: No proposal has that id.
        """
        with self.repository.read() as tx:
            return self._load(tx, proposal_id)

    def get_many(self, proposal_ids: Collection[str]) -> dict[str, Proposal]:
        """The proposals with these ids, by id, in one read; an unknown id is left out."""
        if not proposal_ids:
            return {}
        with self.repository.read() as tx:
            return tx.proposals_by_id(proposal_ids)

    def get_with_checkpoint(self, proposal_id: str) -> tuple[Proposal, Checkpoint | None]:
        """One proposal and the checkpoint it resumes from (``None`` if it names none or that
        checkpoint is gone), in one read: what a resume starts from.

        Raises:
            ProposalNotFound: No proposal has that id.
        """
        with self.repository.read() as tx:
            proposal = self._load(tx, proposal_id)
            checkpoint = tx.checkpoint(proposal.checkpoint_id) if proposal.checkpoint_id else None
        return proposal, checkpoint

    def list(
        self,
        *,
        status: ProposalStatus | str | Sequence[ProposalStatus | str] | None = None,
        owner: str | None = None,
        thread_id: str | None = None,
        tool_name: str | None = None,
        domain: str | None = None,
        runtime: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        newest_first: bool = False,
    ) -> ProposalPage:
        """One page of proposals in stable (created_at, id) order.

        Args:
            status: One status or several.
            owner: Requesting agent id.
            thread_id: Agent thread.
            tool_name: Tool name.
            domain: Policy domain.
            runtime: Runtime that asked (``sdk``, ``claude-code``, ``mcp:<server>``...).
            limit: Page size (1-1000).
            cursor: ``next_cursor`` of the previous page.
            newest_first: Descending order instead of ascending.

        Returns:
            The page and the cursor of the next one (``None`` on the last page).
        """
        if status is None:
            statuses: list[ProposalStatus] = []
        elif isinstance(status, str):
            statuses = [ProposalStatus(status)]
        else:
            statuses = [ProposalStatus(item) for item in status]
        size = max(1, min(limit, 1000))
        with self.repository.read() as tx:
            rows = tx.list_proposals(
                statuses=statuses, owner=owner, thread_id=thread_id, tool_name=tool_name,
                domain=domain, runtime=runtime, after=decode_cursor(cursor) if cursor else None,
                newest_first=newest_first, limit=size + 1,
            )  # fmt: skip
        items = rows[:size]
        next_cursor = None
        if len(rows) > size:
            next_cursor = encode_cursor(items[-1].created_at, items[-1].proposal_id)
        return ProposalPage(items=tuple(items), next_cursor=next_cursor)

    def _decide(
        self,
        proposal_id: str,
        *,
        action: str,
        wanted: str,
        from_status: ProposalStatus,
        to_status: ProposalStatus,
        approver_id: str,
        reason: str | None,
        context: ApproverContext | None,
        via: Via | None,
        grants: bool,
    ) -> Proposal:
        decision = _Decision(
            action=action, wanted=wanted, from_status=from_status, to_status=to_status,
            approver_id=approver_id, reason=reason, context=self._context(context, via),
            identity=EnvironmentIdentity.current(), grants=grants,
        )  # fmt: skip

        def decide(late: bool) -> Proposal | LedgerError:
            with self.repository.write(late_lock=late) as tx:
                return self._decide_in_tx(tx, proposal_id, decision, last=True)

        decided = self._late_or_early(decide)
        if isinstance(decided, LedgerError):
            raise decided  # its expiry was recorded
        return decided

    def _decide_in_tx(
        self, tx: LedgerTx, proposal_id: str, decision: _Decision, *, last: bool,
        explain_miss: bool = True,
    ) -> Proposal | LedgerError:  # fmt: skip
        """One decision in the open write ``tx``.

        Args:
            last: Nothing follows in ``tx``: the ``COMMIT`` may go with the writes.
            explain_miss: A conditional UPDATE that misses (a row changed outside the
                supervisor) raises the proposal's state error; otherwise (and always in a
                write that takes the lock late, whose caller then runs it again)
                ``RowsNotMatched``.

        Returns:
            The decided proposal, or the error to raise once ``tx`` commits: its expiry,
            recorded in ``tx``. An error raised wrote nothing for this proposal.
        """
        checked = self._check_decision(tx, proposal_id, decision)
        if not isinstance(checked, _Checked):
            return checked
        return self._write_decision(tx, checked, last=last, explain_miss=explain_miss)

    def _check_decision(
        self, tx: LedgerTx, proposal_id: str, decision: _Decision
    ) -> Proposal | LedgerError | _Checked:
        """The reads and checks of :meth:`_decide_in_tx`: the decision to write, or what it
        came to without a decision record (an expiry or a quorum vote, written here).

        Raises:
            LedgerError: The proposal cannot be decided (nothing was written for it).
        """
        now = self._now()
        current, _ = self._load_for_write(tx, proposal_id)
        if current.status is not decision.from_status:
            raise self._state_error(tx, current, decision.wanted)
        action, approver_id, reason = decision.action, decision.approver_id, decision.reason
        policy_version: int | None = None
        if decision.grants:
            # Read in this write transaction: a policy change cannot interleave.
            policy_version = self._check_grant(
                tx, current, decision.identity, approver_id, approving=action == "approve"
            )
        if current.expires_at <= now and decision.to_status is not _S.CANCELLED:
            self._expire_in_tx(tx, current, now)
            return ApprovalExpired(proposal_id, expires_at=current.expires_at)
        if action == "approve" and self._quorum_short(current, decision.identity):
            return self._vote(tx, current, decision.identity, approver_id, reason,
                              decision.context, now, policy_version)  # fmt: skip
        payload = self._decision_payload(
            current, to_status=decision.to_status, approver_id=approver_id, reason=reason,
            context=decision.context, identity=decision.identity, policy_version=policy_version,
        )  # fmt: skip
        if action == "approve" and current.approvals_required > 1:
            payload["quorum"] = [vote.identity for vote in current.approvals]
        return _Checked(current, decision, payload, now)

    def _write_decision(
        self, tx: LedgerTx, checked: _Checked, *, last: bool, explain_miss: bool = True
    ) -> Proposal:
        """The writes of a checked decision: the conditional UPDATE and its audit record."""
        current, decision, now = checked.current, checked.decision, checked.now
        proposal_id = current.proposal_id
        try:
            with tx.pipelined(commit=last):
                changed = tx.update_proposal_from(
                    current,
                    expect_status=decision.from_status,
                    values={
                        "status": decision.to_status, "decided_at": now, "updated_at": now,
                        "approver_id": decision.approver_id,
                        "approver_context": decision.context, "decision_reason": decision.reason,
                    },
                )  # fmt: skip
                tx.append_audit(
                    at=now, actor=decision.approver_id, action=decision.action,
                    subject=proposal_id, payload=checked.payload,
                )  # fmt: skip
        except RowsNotMatched:
            if not explain_miss or tx.late:
                raise
            raise self._state_error(tx, self._load(tx, proposal_id), decision.wanted) from None
        assert changed is not None  # a miss in the block raised RowsNotMatched
        return changed

    def approve(
        self,
        proposal_id: str,
        approver_id: str,
        reason: str | None = None,
        *,
        context: ApproverContext | None = None,
        via: Via | None = None,
    ) -> Proposal:
        """Approve a pending proposal (pending -> approved).

        Args:
            proposal_id: The proposal.
            approver_id: A label for who decides (recorded beside the OS identity of this
                process, which is what the approval policy matches).
            reason: Why (recorded and audited).
            context: What the ledger can see of the approver; captured from this process if
                omitted.
            via: The channel (sdk, tui, cli); overrides ``context.via``.

        Returns:
            The approved proposal.

        Raises:
            ProposalNotFound: No such proposal.
            ApprovalAlreadyDecided: It was already decided; names by whom and when.
            ApprovalExpired: Its expiry passed (it is marked expired).
            SelfApprovalForbidden: The ledger's policy forbids the requester approving, and
                this process runs as the proposal's user.
            ApproverNotAllowed: This process's OS identity is not allowlisted for one of its
                domains.
            PolicyInvalid: The stored policy cannot be read (nothing is approved).
        """
        return self._decide(
            proposal_id, action="approve", wanted="approved", from_status=_S.PENDING,
            to_status=_S.APPROVED, approver_id=approver_id, reason=reason, context=context,
            via=via, grants=True,
        )  # fmt: skip

    def approve_many(
        self,
        proposal_ids: Sequence[str],
        approver_id: str,
        reason: str | None = None,
        *,
        context: ApproverContext | None = None,
        via: Via | None = None,
    ) -> tuple[Proposal | LedgerError, ...]:
        """Approve several pending proposals in one write: one wait for the chain lock (on
        PostgreSQL) and one commit for all of them.

        Each proposal goes through what :meth:`approve` does (the same checks, one audit
        record, its quorum vote or expiry), in the order given; one that cannot be approved
        gets the error :meth:`approve` would have raised, and the others go on.

        Returns:
            For each id given, in order: the approved proposal (still pending for a quorum
            vote), or the error (``ApprovalAlreadyDecided``, ``ApprovalExpired`` (it is
            marked expired), ``ProposalNotFound``, ``ApproverNotAllowed`` ...).

        Raises:
            LedgerBusy: The ledger's write lock stayed taken (nothing was approved).
            LedgerUnavailable: The ledger cannot be reached or written (nothing was approved).
        """
        decision = _Decision(
            action="approve", wanted="approved", from_status=_S.PENDING, to_status=_S.APPROVED,
            approver_id=approver_id, reason=reason, context=self._context(context, via),
            identity=EnvironmentIdentity.current(), grants=True,
        )  # fmt: skip
        named_once = len(set(proposal_ids)) == len(proposal_ids)

        def decide_all(late: bool) -> builtins.list[Proposal | LedgerError]:
            # Late (PostgreSQL): every proposal is read and checked before the chain lock, and
            # the lock, the guards and all the writes go in one pipeline with the COMMIT.
            # Lock first, and for a batch that names a proposal twice: each is read and written
            # in turn (so the second time it is already decided).
            late = late and named_once
            outcomes: builtins.list[Proposal | LedgerError | _Checked] = []
            with self.repository.write(late_lock=late) as tx:
                if late:
                    tx.prefetch_for_late_write(proposal_ids)
                for proposal_id in proposal_ids:
                    try:
                        if late:
                            outcomes.append(self._check_decision(tx, proposal_id, decision))
                        else:
                            outcomes.append(self._decide_in_tx(
                                tx, proposal_id, decision, last=False, explain_miss=False
                            ))  # fmt: skip
                    except _WHOLE_WRITE_ERRORS:
                        raise
                    except LedgerError as error:  # raised before it wrote anything
                        outcomes.append(error)
                with tx.pipelined(commit=True):
                    decided = [
                        self._write_decision(tx, outcome, last=False, explain_miss=False)
                        if isinstance(outcome, _Checked) else outcome
                        for outcome in outcomes
                    ]  # fmt: skip
            return decided

        try:
            return tuple(self._late_or_early(decide_all))
        except RowsNotMatched:
            # A row changed outside the supervisor: the write was rolled back. Decide each on
            # its own, so each reports its real state.
            outcomes: builtins.list[Proposal | LedgerError] = []
            for proposal_id in proposal_ids:
                try:
                    outcomes.append(self.approve(proposal_id, approver_id, reason,
                                                 context=decision.context))  # fmt: skip
                except _WHOLE_WRITE_ERRORS:
                    raise
                except LedgerError as error:
                    outcomes.append(error)
        return tuple(outcomes)

    def approve_similar(
        self,
        proposal_id: str,
        approver_id: str,
        *,
        patterns: Mapping[str, Any] | None = None,
        seconds: float = DEFAULT_GRANT_SECONDS,
        max_uses: int = DEFAULT_GRANT_USES,
        any_agent: bool = False,
        reason: str | None = None,
        context: ApproverContext | None = None,
        via: Via | None = None,
    ) -> tuple[Proposal, Grant]:
        """Approve a pending proposal and grant similar calls for a while ("allow similar").

        The grant allows later calls of the same tool, schema and execution target (and agent,
        unless ``any_agent``) whose arguments match ``patterns`` (argument name -> pattern, see
        :mod:`supervisor.rules.grants`; arguments not named stay exact), for ``seconds`` and at
        most ``max_uses`` calls. Both are checked before anything changes, and the approval
        policy applies to the grant as to the approval.

        Raises:
            GrantRefused: The tool is never-grantable, the proposal needs a quorum, or the
                lifetime or cap is out of range.
            GrantInvalid: A pattern is malformed or does not match the call.
            Everything :meth:`approve` raises.
        """
        current = self.get(proposal_id)
        check_patterns(patterns or {}, current.arguments)  # refuse before approving anything
        check_grantable(current, seconds=seconds, max_uses=max_uses)
        approved = self.approve(proposal_id, approver_id, reason, context=context, via=via)
        identity = EnvironmentIdentity.current()
        with self.repository.write() as tx:
            self._check_grant(tx, approved, identity, approver_id, approving=False)
            grant = self._create_grant(
                tx, approved, approver_id=approver_id, identity=identity,
                patterns=patterns or {}, seconds=seconds, max_uses=max_uses,
                any_agent=any_agent, reason=reason, now=self._now(),
            )  # fmt: skip
        return approved, grant

    def reject(
        self,
        proposal_id: str,
        approver_id: str,
        reason: str | None = None,
        *,
        context: ApproverContext | None = None,
        via: Via | None = None,
    ) -> Proposal:
        """Reject a pending proposal (pending -> rejected). Raises as :meth:`approve`."""
        return self._decide(
            proposal_id, action="reject", wanted="rejected", from_status=_S.PENDING,
            to_status=_S.REJECTED, approver_id=approver_id, reason=reason, context=context,
            via=via, grants=False,
        )  # fmt: skip

    def cancel(
        self,
        proposal_id: str,
        approver_id: str,
        reason: str | None = None,
        *,
        context: ApproverContext | None = None,
        via: Via | None = None,
    ) -> Proposal:
        """Withdraw a pending proposal (pending -> cancelled). Raises as :meth:`approve`."""
        return self._decide(
            proposal_id, action="cancel", wanted="cancelled", from_status=_S.PENDING,
            to_status=_S.CANCELLED, approver_id=approver_id, reason=reason, context=context,
            via=via, grants=False,
        )  # fmt: skip

    def revoke(
        self,
        proposal_id: str,
        approver_id: str,
        reason: str | None = None,
        *,
        context: ApproverContext | None = None,
        via: Via | None = None,
    ) -> Proposal:
        """Take back an approval before it is claimed (approved -> cancelled).

        Raises:
            NotApproved: The proposal is still pending (use :meth:`cancel`).
            ApprovalAlreadyDecided: It was already claimed or decided otherwise.
        """
        return self._decide(
            proposal_id, action="revoke", wanted="revoked", from_status=_S.APPROVED,
            to_status=_S.CANCELLED, approver_id=approver_id, reason=reason, context=context,
            via=via, grants=False,
        )  # fmt: skip
