"""Shared state and helpers of the approval ledger's parts."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.engine import Engine

from supervisor.canonical import normalise, sha256_hex
from supervisor.errors import CanonicalJSONError
from supervisor.ledger.clock import Clock, SystemClock, as_utc
from supervisor.ledger.errors import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    IdentityNotVerified,
    LedgerError,
    NotApproved,
    PolicyInvalid,
    PolicyMismatch,
    ProposalNotFound,
)
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.lease_time import lease_seconds_from_env
from supervisor.ledger.models import ApproverContext, Execution, Proposal, ProposalStatus, Via
from supervisor.ledger.policy import (
    NO_POLICY,
    POLICY_APPLY,
    POLICY_SUBJECT,
    ApprovalPolicy,
    PolicyInForce,
    PolicyVersion,
)
from supervisor.store.migrate import ensure_schema
from supervisor.store.repository import AuditEntry, LedgerTx, Repository, RowsNotMatched

_T = TypeVar("_T")

DEFAULT_TTL_SECONDS = 24 * 3600.0
#: Late attempts of a write (chain lock taken with its writes) before one takes the lock first.
_LATE_ATTEMPTS = 2


def validated_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments as normalised JSON data.

    Raises:
        CanonicalJSONError: Not a JSON object of JSON data.
    """
    if not isinstance(arguments, Mapping):
        raise CanonicalJSONError(
            "Tool arguments must be a JSON object.", hint="Pass a dict of argument names."
        )
    validated: dict[str, Any] = normalise(dict(arguments))
    return validated


class LedgerBase:
    """Construction and helpers shared by the ledger's mixins.

    Args:
        engine_or_repository: An engine (its schema is brought current) or a repository.
        clock: Where time comes from; inject a ``ManualClock`` in tests.
        policy: The approval policy this process expects. The ledger enforces its stored
            policy for every process; a ledger with none stores this one (audited, as applied
            by this process's OS identity). ``None`` uses the stored policy.
        default_ttl_seconds: Expiry of proposals proposed without an explicit TTL.
        lease_seconds: How long the leases this process holds (its process lease, turn
            leases) last without renewal; default ``SUPERVISOR_LEASE_SECONDS``, else 60 s.

    Raises:
        PolicyMismatch: ``policy`` differs from the policy the ledger enforces (nothing is
            changed; use ``supervisor policy apply`` to change it).
    """

    def __init__(
        self,
        engine_or_repository: Engine | Repository,
        clock: Clock | None = None,
        *,
        policy: ApprovalPolicy | None = None,
        default_ttl_seconds: float = DEFAULT_TTL_SECONDS,
        lease_seconds: float | None = None,
    ) -> None:
        if isinstance(engine_or_repository, Repository):
            self.repository = engine_or_repository
        else:
            ensure_schema(engine_or_repository)
            self.repository = Repository(engine_or_repository)
        self.clock: Clock = clock or SystemClock()
        self.default_ttl_seconds = default_ttl_seconds
        self.lease_seconds = (
            lease_seconds if lease_seconds is not None else lease_seconds_from_env()
        )
        self._parsed_policy: tuple[PolicyInForce, ApprovalPolicy] | None = None
        self._claimed: OrderedDict[str, Execution] = OrderedDict()
        """The executions this instance claimed and has not finished yet, oldest first: a
        finish uses one instead of reading it (``ExecutionMixin._finish``)."""
        if policy is not None:
            self._bind_policy(policy)

    @property
    def policy(self) -> ApprovalPolicy:
        """The approval policy the ledger enforces now (read from the ledger)."""
        with self.repository.read() as tx:
            return self._policy_in_force(tx)[0]

    def _bind_policy(self, policy: ApprovalPolicy) -> None:
        """Accept ``policy`` if the ledger enforces it, store it if the ledger has none."""
        with self.repository.read() as tx:
            stored = tx.latest_policy_version()
        if stored is not None and stored.document_hash == policy.document_hash:
            return
        if stored is None and policy == NO_POLICY:
            return
        with self.repository.write() as tx:
            stored = tx.latest_policy_version()
            if stored is None and policy != NO_POLICY:
                self._store_policy(
                    tx, policy, previous=None, via="sdk",
                    reason="given to the ledger's first opener (policy=) while none was stored",
                )  # fmt: skip
            elif stored is not None and stored.document_hash != policy.document_hash:
                raise PolicyMismatch(
                    stored_version=stored.version,
                    stored_hash=stored.document_hash,
                    given_hash=policy.document_hash,
                )

    def _store_policy(
        self,
        tx: LedgerTx,
        policy: ApprovalPolicy,
        *,
        previous: PolicyVersion | None,
        via: Via,
        reason: str | None,
    ) -> PolicyVersion:
        """Append the next policy version with its audit record (inside a write).

        Raises:
            IdentityNotVerified: A user namespace maps this process's uid, so the version could
                not name who applied it.
        """
        now = self._now()
        who = EnvironmentIdentity.current()
        if not who.verified:
            raise IdentityNotVerified(identity=str(who))
        identity = str(who)
        number = (previous.version if previous else 0) + 1
        record = tx.append_audit(
            at=now, actor=identity, action=POLICY_APPLY, subject=POLICY_SUBJECT,
            payload={
                "version": number, "document_hash": policy.document_hash,
                "document": policy.to_document(),
                "previous_version": previous.version if previous else None,
                "previous_hash": previous.document_hash if previous else None,
                "applied_by": identity, "via": via, "reason": reason,
            },
        )  # fmt: skip
        assert record is not None  # chained here: this write took the lock first
        version = PolicyVersion(
            version=number, document=policy.to_document(), document_hash=policy.document_hash,
            applied_by=identity, applied_at=now, reason=reason, audit_seq=record.seq,
        )  # fmt: skip
        tx.insert_policy_version(version)
        return version

    def _policy_in_force(self, tx: LedgerTx) -> tuple[ApprovalPolicy, int]:
        """The stored policy in force and its version (``NO_POLICY``, 0 when none is stored).

        Raises:
            PolicyInvalid: The stored document does not match its hash or cannot be read, or
                the row in force is not the version the newest ``policy_apply`` audit record
                applied (a row written outside the ledger, or a deleted one); no authority is
                granted under a policy the ledger cannot vouch for.
        """
        in_force = tx.policy_in_force()
        stored = in_force.stored
        if stored is None and in_force.record_json is None:
            return NO_POLICY, 0
        cached = self._parsed_policy
        if cached is not None and cached[0] == in_force and stored is not None:
            return cached[1], stored.version
        source = f"stored policy v{stored.version}" if stored else "stored policy"
        unaudited = in_force.audit_problem()
        if unaudited is not None:
            raise PolicyInvalid(
                unaudited,
                source=source,
                hint="The policy table was written outside the supervisor: check `supervisor "
                "audit verify`, then re-apply the intended policy with `supervisor policy "
                "apply FILE`.",
            )
        assert stored is not None  # audit_problem() names a missing row
        if sha256_hex(stored.document_json.encode()) != stored.document_hash:
            raise PolicyInvalid(
                "the document does not match its hash",
                source=source,
                hint="Check `supervisor audit verify` and re-apply the policy with "
                "`supervisor policy apply FILE`.",
            )
        try:
            document = json.loads(stored.document_json)
        except ValueError:
            raise PolicyInvalid("the document is not JSON", source=source) from None
        policy = ApprovalPolicy.from_document(document, source=source)
        self._parsed_policy = (in_force, policy)
        return policy, stored.version

    def _check_grant(
        self,
        tx: LedgerTx,
        proposal: Proposal,
        identity: EnvironmentIdentity,
        approver_id: str,
        *,
        approving: bool,
    ) -> int:
        """Apply the policy in force to a granting decision; returns the policy version read.

        Raises:
            SelfApprovalForbidden, ApproverNotAllowed, PolicyInvalid.
        """
        policy, version = self._policy_in_force(tx)
        policy.check_grant(proposal, identity, approving=approving, approver_id=approver_id)
        return version

    def _late_or_early(self, step: Callable[[bool], _T]) -> _T:
        """Run a write ``step(late_lock)`` with the chain lock taken late on PostgreSQL (held
        while the server runs the writes, not across the step's round trips), and again with
        the lock taken first if what it read before the lock changed meanwhile (another write
        of the same proposal or of the policy won the race; the rerun then reports the state it
        finds). A late attempt that misses committed nothing.

        A miss is tried late once more before the lock is taken first: the write it lost to
        has committed, so the new read sees it, and a step that can no longer happen (the
        claim another executor won, an approval already decided) is refused without taking
        the lock at all; only a second miss takes it first, so no step misses for ever."""
        if self.repository.dialect != "postgresql":
            return step(False)
        for _ in range(_LATE_ATTEMPTS):
            try:
                return step(True)
            except RowsNotMatched:
                continue
        return step(False)

    def _now(self) -> datetime:
        return as_utc(self.clock.now())

    @staticmethod
    def _load(tx: LedgerTx, proposal_id: str) -> Proposal:
        proposal = tx.proposal(proposal_id)
        if proposal is None:
            raise ProposalNotFound(proposal_id)
        return proposal

    @staticmethod
    def _load_for_write(
        tx: LedgerTx, proposal_id: str, *, trail: bool = False
    ) -> tuple[Proposal, Execution | None]:
        """The proposal and its execution (if claimed), in one statement of a write
        (``trail``: with its audit records, see ``LedgerTx.proposal_for_write``)."""
        found = tx.proposal_for_write(proposal_id, trail=trail)
        if found is None:
            raise ProposalNotFound(proposal_id)
        return found

    @staticmethod
    def _state_error(tx: LedgerTx, proposal: Proposal, wanted: str) -> LedgerError:
        """The precise error for acting on ``proposal`` in a state that does not allow it."""
        status = proposal.status
        if status is ProposalStatus.EXPIRED:
            return ApprovalExpired(proposal.proposal_id, expires_at=proposal.expires_at)
        if status is ProposalStatus.PENDING and wanted in ("claimed", "revoked"):
            return NotApproved(proposal.proposal_id, status=status.value)
        if status.consumed:
            execution = tx.execution(proposal.proposal_id)
            if execution is not None:
                return ApprovalAlreadyDecided(
                    proposal.proposal_id,
                    status=status.value,
                    by=execution.executor.executor_id,
                    at=execution.started_at,
                    wanted=wanted,
                )
        return ApprovalAlreadyDecided(
            proposal.proposal_id,
            status=status.value,
            by=proposal.approver_id,
            at=proposal.decided_at,
            wanted=wanted,
        )

    @staticmethod
    def _decision_payload(
        proposal: Proposal,
        *,
        to_status: ProposalStatus,
        approver_id: str,
        reason: str | None,
        context: ApproverContext,
        identity: EnvironmentIdentity,
        policy_version: int | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "from": proposal.status.value,
            "to": to_status.value,
            "args_hash": proposal.args_hash,
            "approver_id": approver_id,
            "reason": reason,
            "context": context.model_dump(),
            "identity": str(identity),
        }
        if policy_version is not None:
            # What the policy check saw: the trail refuses a grant checked against domains or a
            # user other than the proposed ones (a row rewritten to pass the policy).
            payload.update(
                policy_version=policy_version, domains=list(proposal.domains), user=proposal.user
            )
        return payload

    @staticmethod
    def _context(context: ApproverContext | None, via: Via | None) -> ApproverContext:
        if context is None:
            return ApproverContext.current(via or "sdk")
        if via is not None and context.via != via:
            return context.model_copy(update={"via": via})
        return context

    @staticmethod
    def _expire_in_tx(tx: LedgerTx, proposal: Proposal, now: datetime) -> bool:
        """Mark a pending/approved proposal whose expiry passed as expired, with its audit row."""
        changed = tx.update_proposal(
            proposal.proposal_id,
            expect_status=proposal.status,
            expect_expires_at=proposal.expires_at,
            values={"status": ProposalStatus.EXPIRED, "updated_at": now},
        )
        if changed == 1:
            entry = LedgerBase._expired_entry(
                proposal.proposal_id, proposal.status, proposal.expires_at, now
            )
            tx.append_audit(**entry._asdict())
        return changed == 1

    @staticmethod
    def _expired_entry(
        proposal_id: str, status: ProposalStatus, expires_at: datetime, now: datetime
    ) -> AuditEntry:
        """The expire record of a proposal (its status and expiry as they were)."""
        payload = {"from": status.value, "to": "expired", "expires_at": expires_at.isoformat()}
        return AuditEntry(now, "ledger", "expire", proposal_id, payload)

    @staticmethod
    def _audit_proposed(
        tx: LedgerTx, proposal: Proposal, now: datetime, *, original_ttl_seconds: float
    ) -> None:
        """The propose record: it binds every field the claim and ``verify`` check.

        Args:
            original_ttl_seconds: The TTL of the first proposal of the supersede chain (the
                proposal's own for a new one, inherited by edits): the extend cap's basis.
        """
        tx.append_audit(
            at=now,
            actor=proposal.owner or "agent",
            action="propose",
            subject=proposal.proposal_id,
            payload={
                "tool": proposal.tool_name,
                "schema_hash": proposal.tool_schema_hash,
                "args_hash": proposal.args_hash,
                "target": proposal.execution_target,
                "owner": proposal.owner,
                "user": proposal.user,
                "thread_id": proposal.thread_id,
                "domains": list(proposal.domains),
                "risk": proposal.risk,
                "expires_at": proposal.expires_at.isoformat(),
                "original_ttl_seconds": original_ttl_seconds,
                "supersedes_id": proposal.supersedes_id,
                **(
                    {"approvals_required": proposal.approvals_required}
                    if proposal.approvals_required > 1
                    else {}
                ),
            },
        )
