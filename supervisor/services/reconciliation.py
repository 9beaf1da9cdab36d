"""Calls that stopped mid-execution, for a human to reconcile: the TUI's reconciliation view.

``ReconciliationService`` runs recovery on its own thread (at start and every ``interval``
seconds: one query while nothing is executing) and keeps the list of ``needs_reconciliation``
proposals, publishing a :class:`ReconcileChange` when it changes. :meth:`detail` reads what a
human needs to check the world: what ran (tool, canonical arguments, execution target), where
it stopped (executor, pid, host, claimed at, why it was flagged) and the last trace events of
its thread. :meth:`reconcile` records the finding with this supervisor's identity.
:func:`stopped_lines` is the one wording of "where it stopped", for the TUI and the CLI.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import (
    Execution,
    Proposal,
    ProposalStatus,
    ReconciledOutcome,
    Reconciliation,
    TraceEvent,
)
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.connection import LedgerConnection, ReaderThread
from supervisor.services.identity import ApproverIdentity
from supervisor.services.listeners import Listeners
from supervisor.services.recovery import recover_now

#: Most proposals the view lists (oldest first).
LIST_LIMIT = 200
#: Trace events of the run shown for the selected proposal (the newest).
TRACE_EVENTS = 8


@dataclass(frozen=True)
class ReconcileChange:
    """The calls awaiting a human's finding, after a refresh that changed them.

    Attributes:
        proposals: Every ``needs_reconciliation`` proposal, oldest first.
        flagged: The executions this refresh's recovery flagged (their executor just went).
    """

    proposals: tuple[Proposal, ...] = ()
    flagged: tuple[Execution, ...] = ()


@dataclass(frozen=True)
class ReconcileDetail:
    """What a human needs to check whether a stopped call took effect."""

    proposal: Proposal
    execution: Execution | None
    reconciliation: Reconciliation | None
    events: tuple[TraceEvent, ...] = field(default_factory=tuple)


def reconcile_command(proposal_id: str) -> str:
    """The CLI command that records a finding for ``proposal_id``."""
    return (
        f"supervisor proposals reconcile {proposal_id} --as executed|failed "
        '--reason "what you checked"'
    )


def stopped_lines(
    proposal: Proposal, execution: Execution | None, found: Reconciliation | None
) -> list[tuple[str, str]]:
    """``(label, text)`` rows saying what ran, where it stopped and what a human found.

    Empty for a proposal that was never claimed. Every text is ledger data: escape it.
    """
    if execution is None:
        return []
    executor = execution.executor
    rows = [
        ("execution", execution.state),
        ("executor", f"{executor.executor_id} (pid {executor.pid} on {executor.host})"),
        ("claimed", execution.started_at.isoformat(timespec="seconds")),
    ]
    if found is not None and found.flagged_at is not None:
        when = found.flagged_at.isoformat(timespec="seconds")
        rows.append(("flagged", f"{when}: {found.flagged_reason or 'its executor is gone'}"))
    if found is not None and found.outcome is not None:
        at = found.reconciled_at.isoformat(timespec="seconds") if found.reconciled_at else "?"
        rows.append(
            ("reconciled", f"{found.outcome} by {found.reconciled_by} at {at}: {found.reason}")
        )
    if proposal.status is ProposalStatus.NEEDS_RECONCILIATION:
        rows.append(("next", reconcile_command(proposal.proposal_id)))
    return rows


class ReconciliationService:
    """Recovery plus the list and details of calls awaiting reconciliation.

    Args:
        ledger: The shared ledger.
        identity: Who records findings from here (``via`` from its context).
        connection: Told whether each refresh reached the ledger (shared by the services).
        interval: Seconds between refreshes of the background thread.
    """

    def __init__(
        self,
        ledger: ApprovalLedger,
        identity: ApproverIdentity,
        *,
        connection: LedgerConnection | None = None,
        interval: float = 1.0,
    ) -> None:
        self.ledger = ledger
        self.identity = identity
        self.connection = connection or LedgerConnection()
        self.interval = interval
        self._lock = threading.Lock()
        self._proposals: tuple[Proposal, ...] = ()
        self._loaded = False
        self._listeners: Listeners[ReconcileChange] = Listeners()
        self._reader = ReaderThread(self.connection, "reconciliation")

    def subscribe(self, listener: Callable[[ReconcileChange], None]) -> None:
        """Call ``listener`` (from a background thread) when the list changes."""
        self._listeners.subscribe(listener)

    def unsubscribe(self, listener: Callable[[ReconcileChange], None]) -> None:
        """Stop calling ``listener``."""
        self._listeners.unsubscribe(listener)

    @property
    def loaded(self) -> bool:
        """True once the first refresh read the list."""
        return self._loaded

    def proposals(self) -> list[Proposal]:
        """The ``needs_reconciliation`` proposals as of the last refresh, oldest first."""
        with self._lock:
            return list(self._proposals)

    def refresh(self) -> ReconcileChange | None:
        """Run recovery, re-read the list; publish and return the change if it changed.

        Recovery that cannot write (a read-only ledger) is skipped; the list is still read.
        """
        flagged: list[Execution] = []
        with contextlib.suppress(LedgerError):
            flagged = recover_now(self.ledger)
        page = self.ledger.list(status=ProposalStatus.NEEDS_RECONCILIATION, limit=LIST_LIMIT)
        with self._lock:
            before = [(p.proposal_id, p.updated_at) for p in self._proposals]
            changed = not self._loaded or before != [
                (p.proposal_id, p.updated_at) for p in page.items
            ]
            self._proposals = page.items
            self._loaded = True
        if not changed and not flagged:
            return None
        change = ReconcileChange(page.items, tuple(flagged))
        self._listeners.publish(change)
        return change

    def detail(self, proposal_id: str) -> ReconcileDetail:
        """What ran, where it stopped and the last trace events of its thread.

        Raises:
            ProposalNotFound: No such proposal.
        """
        proposal = self.ledger.get(proposal_id)
        events: list[TraceEvent] = []
        if proposal.thread_id is not None:
            events = self.ledger.trace_events(
                agent_id=proposal.owner or None, thread_id=proposal.thread_id,
                limit=TRACE_EVENTS, newest_first=True,
            )  # fmt: skip
        return ReconcileDetail(
            proposal=proposal,
            execution=self.ledger.execution(proposal_id),
            reconciliation=self.ledger.reconciliation(proposal_id),
            events=tuple(reversed(events)),
        )

    def reconcile(self, proposal_id: str, outcome: ReconciledOutcome, reason: str) -> Execution:
        """Record the human's finding (audited with this supervisor's identity, via tui).

        Raises:
            NotAwaitingReconciliation, ApprovalAlreadyDecided, ProposalNotFound,
            SelfApprovalForbidden, ApproverNotAllowed: See ``ApprovalLedger.reconcile``.
        """
        context = self.identity.context
        execution = self.ledger.reconcile(
            proposal_id, outcome, self.identity.approver_id, reason,
            context=context, via=context.via,
        )  # fmt: skip
        with contextlib.suppress(LedgerError):  # the next refresh catches up otherwise
            self.refresh()
        return execution

    def start(self) -> None:
        """Refresh now and every :attr:`interval` seconds in a daemon thread."""

        def read() -> float:
            self.refresh()
            return self.interval

        self._reader.start(read)

    def stop(self) -> None:
        """Stop refreshing."""
        self._reader.stop()
