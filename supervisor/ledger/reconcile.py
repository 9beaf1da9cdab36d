"""Crash recovery and reconciliation: calls whose executor stopped mid-call go to a human.

An ``executing`` execution whose executor is gone (see :mod:`supervisor.ledger.liveness`) is
flagged ``needs_reconciliation`` by :meth:`ReconcileMixin.recover`; nothing ever runs it again,
since nobody knows whether its side effect happened. A human checks the world and records the
finding with :meth:`ReconcileMixin.reconcile` (executed or failed), checked by the approval
policy like an approval and audited; :meth:`ReconcileMixin.reconciliation` reads both steps
back from the audit chain (what the model and the views are told).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable

from supervisor.ledger.base import LedgerBase
from supervisor.ledger.clock import as_utc
from supervisor.ledger.errors import (
    ApprovalAlreadyDecided,
    InvalidReconcileOutcome,
    LedgerError,
    NotAwaitingReconciliation,
)
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.liveness import executor_alive
from supervisor.ledger.models import (
    ApproverContext,
    AuditRecord,
    Execution,
    ProposalStatus,
    ReconciledOutcome,
    Reconciliation,
    Via,
)
from supervisor.store.repository import LedgerTx

_S = ProposalStatus
IsAlive = Callable[[int, str], bool]
"""``(pid, host) -> bool``: a caller's own liveness check, in place of the ledger's."""


def reconciliation_of(proposal_id: str, records: Iterable[AuditRecord]) -> Reconciliation | None:
    """The flag and the finding among one proposal's audit records (oldest first), or ``None``
    when it was never flagged."""
    flagged: AuditRecord | None = None
    found: AuditRecord | None = None
    for record in records:
        if record.subject != proposal_id:
            continue
        if record.action == "needs_reconciliation":
            flagged, found = record, None
        elif record.action == "reconcile" and flagged is not None:
            found = record
    if flagged is None:
        return None
    why = flagged.payload.get("reason")
    result = Reconciliation(
        proposal_id=proposal_id,
        flagged_at=flagged.at,
        flagged_reason=why if isinstance(why, str) else None,
    )
    if found is None:
        return result
    outcome, reason = found.payload.get("outcome"), found.payload.get("reason")
    if outcome not in ("executed", "failed"):
        return result
    return result.model_copy(
        update={
            "outcome": outcome,
            "reason": reason if isinstance(reason, str) else None,
            "reconciled_by": found.actor,
            "reconciled_at": as_utc(found.at),
        }
    )


class ReconcileMixin(LedgerBase):
    """Recover (flag dead executors' calls), reconcile (a human's finding), read both back."""

    def gone_executions(self, is_alive: IsAlive | None = None) -> list[Execution]:
        """Executions left ``executing`` by an executor that is gone (reads only).

        One query finds the ``executing`` ones (usually none); only then are the process rows
        of their pids read (see :mod:`supervisor.ledger.liveness`).

        Args:
            is_alive: ``(pid, host) -> bool`` instead of the ledger's own check.
        """
        with self.repository.read() as tx:
            running = tx.executions_in_state("executing")
            if not running or is_alive is not None:
                processes = []
            else:
                processes = tx.processes_with_pids(sorted({e.executor.pid for e in running}))
        if is_alive is not None:
            return [e for e in running if not is_alive(e.executor.pid, e.executor.host)]
        now, host = self._now(), socket.gethostname()
        return [e for e in running if not executor_alive(e, processes, now, this_host=host)]

    def recover(self, is_alive: IsAlive | None = None) -> list[Execution]:
        """Flag executions left ``executing`` by dead processes as ``needs_reconciliation``.

        They are never re-run: nobody knows whether the side effect happened, so a human
        decides (see :meth:`reconcile`). Cheap when nothing is executing (one read, no write).

        Args:
            is_alive: ``(pid, host) -> bool``; the default is the ledger's check: a local pid
                that is gone, or an executor whose process row's lease ran out (any host).

        Returns:
            The executions flagged by this call.
        """
        dead = self.gone_executions(is_alive)
        flagged: list[Execution] = []
        if not dead:
            return flagged
        with self.repository.write() as tx:
            now = self._now()
            for execution in dead:
                proposal_id = execution.proposal_id
                executor = execution.executor
                why = (
                    f"{executor.executor_id} (pid {executor.pid} on {executor.host}) stopped "
                    "before recording an outcome"
                )
                changed = tx.update_proposal(
                    proposal_id,
                    expect_status=_S.EXECUTING,
                    values={"status": _S.NEEDS_RECONCILIATION, "updated_at": now},
                )
                if changed != 1:  # it finished (or was flagged) since it was read
                    continue
                tx.update_execution(
                    proposal_id, expect_state="executing", state="needs_reconciliation",
                    reason=why,
                )  # fmt: skip
                tx.append_audit(
                    at=now, actor="ledger", action="needs_reconciliation", subject=proposal_id,
                    payload={"executor": executor.model_dump(), "reason": why},
                )  # fmt: skip
                found = tx.execution(proposal_id)
                if found is not None:
                    flagged.append(found)
        return flagged

    def reconcile(
        self,
        proposal_id: str,
        outcome: ReconciledOutcome,
        approver_id: str,
        reason: str | None = None,
        *,
        context: ApproverContext | None = None,
        via: Via | None = None,
    ) -> Execution:
        """A human records what really happened to a ``needs_reconciliation`` execution.

        The finding is checked by the stored approval policy as an approval is (who may not
        approve the proposal may not reconcile it: self-approval, domain approvers), against
        the OS identity of this process, and audited with that identity and the policy version.

        Args:
            proposal_id: The flagged proposal.
            outcome: ``executed`` (the call took effect) or ``failed`` (it did not).
            approver_id: A label for who found it (recorded beside the OS identity).
            reason: What was checked (recorded, audited, and told to the model).
            context: What the ledger can see of the human; captured from this process if
                omitted.
            via: The channel (sdk, tui, cli).

        Returns:
            The execution, now ``executed`` or ``failed``.

        Raises:
            ProposalNotFound: No such proposal.
            InvalidReconcileOutcome: ``outcome`` is neither ``executed`` nor ``failed``.
            NotAwaitingReconciliation: It was never flagged (pending, approved, executing,
                executed by its executor...).
            ApprovalAlreadyDecided: Someone reconciled it first (names who and when).
            SelfApprovalForbidden, ApproverNotAllowed, IdentityNotVerified: The policy refuses
                this process's OS identity.
        """
        if outcome not in ("executed", "failed"):
            raise InvalidReconcileOutcome(outcome)
        ctx = self._context(context, via)
        identity = EnvironmentIdentity.current()
        to_status = _S.EXECUTED if outcome == "executed" else _S.FAILED
        with self.repository.write() as tx:
            now = self._now()
            current, execution = self._load_for_write(tx, proposal_id)
            if current.status is not _S.NEEDS_RECONCILIATION or execution is None:
                raise self._reconcile_refusal(tx, proposal_id)
            policy_version = self._check_grant(tx, current, identity, approver_id, approving=True)
            changed = tx.update_proposal(
                proposal_id,
                expect_status=_S.NEEDS_RECONCILIATION,
                values={"status": to_status, "updated_at": now},
            )
            if changed != 1:
                raise self._reconcile_refusal(tx, proposal_id)
            tx.update_execution(
                proposal_id, expect_state="needs_reconciliation", state=to_status.value,
                finished_at=now, reason=reason,
            )  # fmt: skip
            payload = self._decision_payload(
                current, to_status=to_status, approver_id=approver_id, reason=reason,
                context=ctx, identity=identity, policy_version=policy_version,
            )  # fmt: skip
            tx.append_audit(
                at=now, actor=approver_id, action="reconcile", subject=proposal_id,
                payload={"outcome": outcome, **payload},
            )  # fmt: skip
            found = tx.execution(proposal_id)
        assert found is not None
        return found

    def _reconcile_refusal(self, tx: LedgerTx, proposal_id: str) -> LedgerError:
        """Who reconciled it first, or why there is nothing to reconcile."""
        current = self._load(tx, proposal_id)
        done = reconciliation_of(proposal_id, tx.audit_of(proposal_id))
        if done is not None and done.outcome is not None:
            return ApprovalAlreadyDecided(
                proposal_id, status=current.status.value, by=done.reconciled_by,
                at=done.reconciled_at, wanted="reconciled",
            )  # fmt: skip
        return NotAwaitingReconciliation(proposal_id, status=current.status.value)

    def reconciliation(self, proposal_id: str) -> Reconciliation | None:
        """Why the call was flagged and the human's finding, or ``None`` if never flagged.

        One indexed read of the proposal's own audit records.
        """
        with self.repository.read() as tx:
            return reconciliation_of(proposal_id, tx.audit_of(proposal_id))
