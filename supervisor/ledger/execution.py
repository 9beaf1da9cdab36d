"""Claiming approved proposals for execution, recording outcomes, and expiry.

Crash recovery and reconciliation are in :mod:`supervisor.ledger.reconcile`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from supervisor.canonical import args_hash as compute_args_hash
from supervisor.ledger.base import LedgerBase
from supervisor.ledger.errors import (
    ApprovalExpired,
    ArgumentsMismatch,
    AuditMismatch,
    LedgerError,
    NotOwner,
)
from supervisor.ledger.models import (
    Blob,
    Execution,
    ExecutorIdentity,
    Proposal,
    ProposalStatus,
    TraceEvent,
)
from supervisor.ledger.trail import claim_refusal, replay
from supervisor.store.repository import LedgerTx, RowsNotMatched

_S = ProposalStatus
_CLAIMED_KEPT = 4096
"""Executions claimed by one ledger instance that it keeps to finish without a read."""


def _identity(executor: ExecutorIdentity | str | None) -> ExecutorIdentity:
    if isinstance(executor, ExecutorIdentity):
        return executor
    return ExecutorIdentity.current(executor or "sdk")


class ExecutionMixin(LedgerBase):
    """Claim / complete / fail / expire (an outcome may commit with its result blob and the
    trace events that report it)."""

    if TYPE_CHECKING:  # from RunsServiceMixin, beside this part in ApprovalLedger

        def redact_trace_event(self, event: TraceEvent) -> TraceEvent: ...

        def _traced(self, count: int) -> None: ...

    def execution(self, proposal_id: str) -> Execution | None:
        """The execution record of a claimed proposal, or ``None`` if it was never claimed."""
        with self.repository.read() as tx:
            return tx.execution(proposal_id)

    def proposals_with_executions(
        self, after_id: str = "", limit: int = 1000
    ) -> list[tuple[Proposal, Execution | None]]:
        """One page of proposals with ids after ``after_id`` (ascending id) and their execution
        records (``None`` for a proposal never claimed), in one read."""
        with self.repository.read() as tx:
            return tx.proposals_with_executions(after_id, max(1, min(limit, 1000)))

    def claim(
        self,
        proposal_id: str,
        expected_args_hash: str,
        executor: ExecutorIdentity | str | None = None,
    ) -> Execution:
        """Consume an approved proposal: write the ``executing`` record ahead of the side effect.

        The args hash is recomputed from the stored tool, schema hash, arguments and target and
        must equal both the stored hash and ``expected_args_hash`` (the hash of what the caller
        is about to run). The row must also be what the audit chain explains: a propose record
        with that hash and the row's owner, user, thread, domains, risk, target and supersede
        link, an approve of it (checked against the proposed domains and user) as the latest
        decision, the proposed (or audited extended) expiry and no earlier claim, read in the
        same transaction. A refused claim is audited (``claim_refused``).

        Args:
            proposal_id: The approved proposal.
            expected_args_hash: Hash of the call about to run (``supervisor.canonical.args_hash``).
            executor: Who runs it; a label or an identity (defaults to this process).

        Returns:
            The execution in state ``executing``.

        Raises:
            ProposalNotFound: No such proposal.
            NotApproved: It is still pending.
            ApprovalAlreadyDecided: It was already claimed (names the executor and time) or
                decided otherwise.
            ApprovalExpired: Its expiry passed (it is marked expired).
            ArgumentsMismatch: The hashes differ; nothing may run.
            AuditMismatch: The row is not what the audit chain explains (the ledger was
                written to outside the supervisor); nothing may run.
        """
        identity = _identity(executor)
        refusal, execution = self._late_or_early(
            lambda late: self._claim(late, proposal_id, expected_args_hash, identity)
        )
        if refusal is not None:
            raise refusal
        assert execution is not None
        claimed = self._claimed
        claimed[proposal_id] = execution
        if len(claimed) > _CLAIMED_KEPT:  # claimed here, finished elsewhere (or never)
            claimed.popitem(last=False)
        return execution

    def _claim(
        self, late: bool, proposal_id: str, expected_args_hash: str, identity: ExecutorIdentity
    ) -> tuple[LedgerError | None, Execution | None]:
        """:meth:`claim` in one write (``late``: taking the chain lock late); returns the
        refusal it recorded or the execution."""
        refusal: LedgerError | None = None
        execution: Execution | None = None
        with self.repository.write(late_lock=late) as tx:
            now = self._now()
            # With its audit records, which the chain check below reads (one round trip).
            current, existing = self._load_for_write(tx, proposal_id, trail=True)
            if current.status is not _S.APPROVED:
                raise self._state_error(tx, current, "claimed")
            recomputed = compute_args_hash(
                current.tool_name,
                current.tool_schema_hash,
                current.arguments,
                current.execution_target,
            )
            if current.expires_at <= now:
                self._expire_in_tx(tx, current, now)
                refusal = ApprovalExpired(proposal_id, expires_at=current.expires_at)
            elif not (recomputed == current.args_hash == expected_args_hash):
                refusal = ArgumentsMismatch(
                    proposal_id,
                    expected=expected_args_hash,
                    stored=current.args_hash,
                    recomputed=recomputed,
                )
                tx.append_audit(
                    at=now, actor=identity.executor_id, action="claim_refused",
                    subject=proposal_id,
                    payload={
                        "reason": "arguments_mismatch", "expected": expected_args_hash,
                        "stored": current.args_hash, "recomputed": recomputed,
                    },
                )  # fmt: skip
            else:
                refusal = self._audit_refusal(tx, current, expected_args_hash, identity, now)
            if refusal is None:
                # ``existing`` was read earlier in this transaction; the proposal UPDATE does
                # not touch executions, so it is what a re-read here would return.
                if existing is not None:
                    raise self._state_error(tx, self._load(tx, proposal_id), "claimed")
                try:
                    with tx.pipelined(commit=True):
                        tx.update_proposal(
                            proposal_id,
                            expect_status=_S.APPROVED,
                            expires_after=now,
                            expect_args_hash=expected_args_hash,
                            values={"status": _S.EXECUTING, "updated_at": now},
                        )
                        execution = tx.insert_execution(
                            proposal_id, identity, expected_args_hash, now
                        )
                        tx.append_audit(
                            at=now, actor=identity.executor_id, action="claim",
                            subject=proposal_id,
                            payload={
                                "args_hash": expected_args_hash,
                                "executor": identity.model_dump(),
                            },
                        )  # fmt: skip
                except RowsNotMatched:
                    if tx.late:
                        raise  # run again with the lock taken first
                    raise self._state_error(tx, self._load(tx, proposal_id), "claimed") from None
        return refusal, execution

    @staticmethod
    def _audit_refusal(
        tx: LedgerTx,
        current: Proposal,
        expected_args_hash: str,
        identity: ExecutorIdentity,
        now: datetime,
    ) -> AuditMismatch | None:
        """Refuse (and audit the refusal) unless the audit chain explains claiming ``current``.

        One indexed read of the proposal's own audit records (``ix_audit_subject``).
        """
        proposal_id = current.proposal_id
        trail = replay(proposal_id, tx.audit_of(proposal_id))
        detail = claim_refusal(trail, current, expected_args_hash)
        if detail is None:
            return None
        tx.append_audit(
            at=now, actor=identity.executor_id, action="claim_refused", subject=proposal_id,
            payload={
                "reason": "audit_mismatch", "detail": detail, "expected": expected_args_hash,
                "stored": current.args_hash,
            },
        )  # fmt: skip
        return AuditMismatch(proposal_id, detail=detail)

    def _finish(
        self,
        proposal_id: str,
        *,
        to_status: Literal[_S.EXECUTED, _S.FAILED],
        outcome_status: str,
        result_ref: str | None,
        reason: str | None,
        executor: ExecutorIdentity | str | None,
        blob: Blob | None,
        trace: Iterable[TraceEvent],
    ) -> Execution:
        wanted = "completed" if to_status is _S.EXECUTED else "failed"
        if blob is not None and blob.content is None:
            raise ValueError("blob must carry its content (see blob_of)")
        batch = [self.redact_trace_event(event) for event in trace]

        def finish(late: bool) -> Execution:
            # The execution this instance claimed needs no read: while it is ``executing``
            # its row is the one the claim inserted (no write changes an execution without
            # moving it out of ``executing``), and the conditional UPDATEs below check both
            # states on the server. Only the first attempt uses it: one that misses reads.
            claimed = self._claimed.pop(proposal_id, None)
            with self.repository.write(late_lock=late) as tx:
                now = self._now()
                if claimed is not None:
                    execution = claimed
                else:
                    current, read = self._load_for_write(tx, proposal_id)
                    if current.status is not _S.EXECUTING or read is None:
                        raise self._state_error(tx, current, wanted)
                    execution = read
                claimed_by = execution.executor.executor_id
                if executor is not None:
                    actor = executor if isinstance(executor, str) else executor.executor_id
                    if actor != claimed_by:
                        raise NotOwner(proposal_id, actor=actor, owner=claimed_by)
                try:
                    with tx.pipelined(commit=blob is None and not batch):
                        tx.update_proposal(
                            proposal_id,
                            expect_status=_S.EXECUTING,
                            values={"status": to_status, "updated_at": now},
                        )
                        finished = tx.update_execution_from(
                            execution, expect_state="executing", state=to_status.value,
                            finished_at=now, outcome_status=outcome_status, result_ref=result_ref,
                            reason=reason,
                        )  # fmt: skip
                        tx.append_audit(
                            at=now, actor=claimed_by,
                            action="complete" if to_status is _S.EXECUTED else "fail",
                            subject=proposal_id,
                            payload={
                                "outcome_status": outcome_status, "result_ref": result_ref,
                                "reason": reason, "args_hash": execution.args_hash,
                            },
                        )  # fmt: skip
                except RowsNotMatched:
                    if tx.late:
                        raise  # run again with the lock taken first
                    raise self._state_error(tx, self._load(tx, proposal_id), wanted) from None
                assert finished is not None  # a miss in the block raised RowsNotMatched
                if blob is not None:
                    tx.insert_blob(blob, now)  # a digest already stored is left as it is
                tx.insert_trace_events(batch)
            return finished

        finished = self._late_or_early(finish)
        self._traced(len(batch))
        return finished

    def complete(
        self,
        proposal_id: str,
        outcome_status: str = "success",
        result_ref: str | None = None,
        *,
        executor: ExecutorIdentity | str | None = None,
        blob: Blob | None = None,
        trace: Iterable[TraceEvent] = (),
    ) -> Execution:
        """Record that the side effect ran (executing -> executed).

        Args:
            proposal_id: The claimed proposal.
            outcome_status: The tool outcome (success, empty, degraded, fallback, ...).
            result_ref: A pointer to the result (blob digest, URL), never the result itself.
            executor: If given, must be the executor that claimed it.
            blob: The result blob (from :meth:`blob_of`, with its content), stored in the same
                transaction (one commit for the outcome and what ``result_ref`` points at).
            trace: Trace events to append in the same transaction (redacted as
                :meth:`append_trace` does).

        Returns:
            The finished execution.

        Raises:
            ProposalNotFound: No such proposal.
            ApprovalAlreadyDecided: It is not executing (already finished, or reconciled).
            NotOwner: ``executor`` is not the one that claimed it.
        """
        return self._finish(
            proposal_id, to_status=_S.EXECUTED, outcome_status=outcome_status,
            result_ref=result_ref, reason=None, executor=executor, blob=blob, trace=trace,
        )  # fmt: skip

    def fail(
        self,
        proposal_id: str,
        outcome_status: str = "error",
        reason: str | None = None,
        *,
        result_ref: str | None = None,
        executor: ExecutorIdentity | str | None = None,
        blob: Blob | None = None,
        trace: Iterable[TraceEvent] = (),
    ) -> Execution:
        """Record that the execution failed (executing -> failed). Takes and raises as
        :meth:`complete`."""
        return self._finish(
            proposal_id, to_status=_S.FAILED, outcome_status=outcome_status,
            result_ref=result_ref, reason=reason, executor=executor, blob=blob, trace=trace,
        )  # fmt: skip

    def expire_due(self, limit: int = 1000) -> list[str]:
        """Mark pending and approved proposals whose expiry passed as expired (audited).

        Returns:
            The ids expired by this sweep (at most ``limit``).
        """
        with self.repository.write() as tx:
            now = self._now()
            due = tx.expiry_due(now, limit)
            changed = tx.expire_due_proposals(due, now)
            expired = [proposal for proposal in due if proposal.proposal_id in changed]
            tx.append_audits([self._expired_entry(*proposal, now) for proposal in expired])
            return [proposal.proposal_id for proposal in expired]
