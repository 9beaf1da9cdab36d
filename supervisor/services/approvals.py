"""The approval inbox as plain Python state, fed by the ledger's change feed.

``ApprovalsService`` keeps the pending proposals and reads a proposal's decision history from
the ledger when asked. A background thread follows the feed (``wait_for_change``) from where the
pending set was read, never the whole log from the start, and
calls subscribers with an :class:`InboxChange` from that thread; a UI must hop to its own loop.
Decisions go straight to the ledger with this supervisor's identity and ``via="tui"``; approve,
batch approve and edit need a :class:`RenderedGuard` (see ``supervisor.services.guard``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import (
    SDK_RUNTIME,
    AuditRecord,
    Proposal,
    ProposalStatus,
    ProposalWaiter,
)
from supervisor.ledger.operator_tokens import OPERATOR_SUBJECT_PREFIX
from supervisor.ledger.policy import diff_arguments
from supervisor.ledger.service import ApprovalLedger
from supervisor.ledger.trail import LEFT_PENDING
from supervisor.services.connection import LedgerConnection
from supervisor.services.guard import RenderedGuard, RenderGuardMissing
from supervisor.services.identity import ApproverIdentity
from supervisor.services.listeners import Listeners
from supervisor.services.rendering import render_arguments, rendered_digest
from supervisor.services.settings import SupervisorSettings

DECISION_ACTIONS = frozenset(
    {"approve", "approve_vote", "reject", "cancel", "revoke", "edit", "expire"}
)
_PAGE = 1000
#: Seconds the loader pauses between pages of the pending set after the first.
_PAGE_PAUSE = 0.01
#: How often the feed thread re-checks which pending proposals lost their waiting process
#: (a death writes nothing to the feed: only a lease running out tells).
ORPHAN_CHECK_SECONDS = 1.0


@dataclass(frozen=True)
class InboxChange:
    """What changed in the inbox since the last notification.

    Attributes:
        upserted: Pending proposals that are new or changed (e.g. extended).
        removed: Ids that left the pending set (decided, expired, purged).
        decisions: Decision records seen on the feed (anyone's, including ours).
        loaded: True once the initial pending set is complete.
        orphaned: The pending proposals whose waiting process is gone, when that set changed
            (``None``: unchanged).
        grants: Records about grants (made, revoked, or a call one allowed).
    """

    upserted: tuple[Proposal, ...] = ()
    removed: tuple[str, ...] = ()
    decisions: tuple[AuditRecord, ...] = ()
    loaded: bool = True
    orphaned: frozenset[str] | None = None
    grants: tuple[AuditRecord, ...] = ()


@dataclass(frozen=True)
class EditResult:
    """A superseding proposal and how its arguments differ from the old ones."""

    old: Proposal
    new: Proposal
    diff: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class BatchResult:
    """Outcome of a batch approval: who was approved and which ones lost a race."""

    approved: tuple[Proposal, ...]
    failed: tuple[LedgerError, ...]


InboxListener = Callable[[InboxChange], None]


def same_turn(one: Proposal, other: Proposal) -> bool:
    """True when a batch may hold both: our own agents' calls always; another runtime's only
    within one known assistant turn of one session."""
    if one.proposal_id == other.proposal_id:
        return True
    if one.runtime == other.runtime == SDK_RUNTIME:
        return True
    return (
        one.runtime == other.runtime
        and one.thread_id == other.thread_id
        and one.turn_id is not None
        and one.turn_id == other.turn_id
    )


class ApprovalsService:
    """Pending proposals, decision history and decisions for one supervisor instance.

    Args:
        ledger: The shared approval ledger.
        identity: Who decides from here (``via`` is taken from its context).
        settings: Instance settings (feed timeout).
        connection: Told whether each read reached the ledger (shared by the services).
    """

    def __init__(
        self,
        ledger: ApprovalLedger,
        identity: ApproverIdentity,
        settings: SupervisorSettings | None = None,
        *,
        connection: LedgerConnection | None = None,
    ) -> None:
        self.ledger = ledger
        self.connection = connection or LedgerConnection()
        self.identity = identity
        self.settings = settings or SupervisorSettings()
        self._lock = threading.RLock()
        self._pending: dict[str, Proposal] = {}
        self._guards: dict[str, RenderedGuard] = {}
        self._listeners: Listeners[InboxChange] = Listeners()
        self._cursor = 0
        self._applied_through = 0
        self._loaded = False
        self._orphans: dict[str, ProposalWaiter] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- subscription and lifecycle -------------------------------------------------------

    def subscribe(self, listener: InboxListener) -> None:
        """Call ``listener`` (from a background thread) after every change."""
        self._listeners.subscribe(listener)

    def unsubscribe(self, listener: InboxListener) -> None:
        """Stop calling ``listener``; unknown listeners are ignored."""
        self._listeners.unsubscribe(listener)

    def _publish(self, change: InboxChange) -> None:
        self._listeners.publish(change)

    def start(self) -> None:
        """Load the pending set and follow the change feed in a daemon thread."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="approvals-feed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop following the feed (returns within one feed timeout)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        checked = 0.0

        def read() -> float:
            nonlocal checked
            if not self._loaded:
                self.load()
            change = self.poll(self.settings.poll_timeout)
            if time.monotonic() - checked >= ORPHAN_CHECK_SECONDS:
                checked = time.monotonic()
                self.refresh_orphans()
                self.sweep_expired()
            # After a change, let the next ones gather: they are read and shown as one.
            return self.settings.inbox_interval if change is not None else 0.0

        try:
            self.connection.follow("approvals", read, self._stop)
        except LedgerError:
            # The ledger was closed or refuses this reader for good; the UI keeps its state.
            return

    # -- reading --------------------------------------------------------------------------

    def load(self) -> list[Proposal]:
        """Read the pending set page by page, publishing each page as soon as it is read.

        The first page is small (``settings.inbox_first_page``) so a UI can paint it at once;
        the rest follows in pages of ``settings.inbox_page``. Between pages the feed records
        written since the load began are applied, so a proposal decided elsewhere leaves the
        inbox while the rest is still loading. The feed cursor is taken before reading, so no
        change is missed; re-applying a record is idempotent.
        """
        head = self.ledger.head()
        with self._lock:
            self._pending = {}
            self._applied_through = head
            self._loaded = False
        # The feed is followed from here: the pending set read below is current as of head
        # (or later), and history is read per proposal, so older records are never walked.
        self._cursor = max(self._cursor, head)
        pending: list[Proposal] = []
        cursor: str | None = None
        size = self.settings.inbox_first_page
        while True:
            page = self.ledger.list(status=ProposalStatus.PENDING, limit=size, cursor=cursor)
            cursor = page.next_cursor
            with self._lock:
                for proposal in page.items:
                    self._pending[proposal.proposal_id] = proposal
                self._loaded = cursor is None
            pending.extend(page.items)
            self._publish(InboxChange(upserted=page.items, loaded=cursor is None))
            if cursor is None:
                return pending
            with self._lock:
                after = self._applied_through
            self._apply_records(self.ledger.events_since(after, _PAGE))
            size = self.settings.inbox_page
            # The inbox is on screen from the first page; the rest is background work that
            # gives way between pages, or the UI's paints and keys wait behind it for the GIL.
            self._stop.wait(_PAGE_PAUSE)

    def poll(self, timeout: float = 0.0) -> InboxChange | None:
        """Apply feed records after the cursor (waiting up to ``timeout``) and publish them.

        The cursor moves only once the records were applied: a read that fails half-way (the
        server went down) is read again from the same cursor, so no proposal is skipped.
        """
        records = self.ledger.wait_for_change(self._cursor, timeout)
        if not records:
            return None
        with self._lock:
            fresh = [record for record in records if record.seq > self._applied_through]
        change = self._apply_records(fresh)
        self._cursor = records[-1].seq
        return change or InboxChange(loaded=self._loaded)

    def _apply_records(self, records: list[AuditRecord]) -> InboxChange | None:
        """Bring the pending set up to date with ``records`` (newer than any applied before)."""
        if not records:
            return None
        subjects: dict[str, set[str]] = {}
        decisions: list[AuditRecord] = []
        grants: list[AuditRecord] = []
        for record in records:
            if record.subject.startswith("grant:") or "grant_id" in record.payload:
                grants.append(record)
            if record.subject.startswith("grant:"):
                continue  # a grant, not a proposal
            subjects.setdefault(record.subject, set()).add(record.action)
            if record.action in DECISION_ACTIONS:
                decisions.append(record)
        removed: list[str] = []
        wanted: list[str] = []
        with self._lock:
            shown = set(self._pending) if self._loaded else None
        for subject, actions in subjects.items():
            if subject in ("retention", "policy") or subject.startswith(OPERATOR_SUBJECT_PREFIX):
                continue  # not proposals
            if actions & LEFT_PENDING:
                removed.append(subject)  # never pending again: nothing to read
            elif shown is None or subject in shown or "propose" in actions:
                wanted.append(subject)
            # else: neither shown nor new, and a proposal is pending only from its creation
        found = self.ledger.get_many(wanted)
        upserted: list[Proposal] = []
        for subject in wanted:
            proposal = found.get(subject)
            if proposal is not None and proposal.status is ProposalStatus.PENDING:
                upserted.append(proposal)
            else:
                removed.append(subject)
        with self._lock:
            self._applied_through = max(self._applied_through, records[-1].seq)
            for proposal in upserted:
                self._pending[proposal.proposal_id] = proposal
            for proposal_id in removed:
                self._pending.pop(proposal_id, None)
                self._guards.pop(proposal_id, None)
        change = InboxChange(
            tuple(upserted), tuple(removed), tuple(decisions), self._loaded, grants=tuple(grants)
        )
        if upserted or removed or decisions or grants:
            self._publish(change)
        return change

    def refresh_orphans(self) -> InboxChange | None:
        """Re-check which pending proposals lost their waiting process; publish a change.

        Returns:
            The change published when the orphaned set changed, else ``None``.
        """
        orphans = self.ledger.orphans(self.pending())
        with self._lock:
            changed = set(orphans) ^ set(self._orphans)
            self._orphans = orphans
            flipped = tuple(self._pending[pid] for pid in changed if pid in self._pending)
        if not changed:
            return None
        change = InboxChange(upserted=flipped, loaded=self._loaded, orphaned=frozenset(orphans))
        self._publish(change)
        return change

    def sweep_expired(self) -> list[str]:
        """Expire the pending proposals whose time ran out, once one in the inbox has.

        Nobody else may be sweeping: the agent that waited may be gone. Without this an
        all-day console would keep showing them as pending (``expired`` in the countdown,
        refused if approved); the expire records come back through the feed and remove them.
        Expiry is enforced at claim time anyway, so a sweep that fails (the ledger busy or
        unreachable) is only tried again at the next check.

        Returns:
            The ids this sweep expired (others may have been swept by another process).
        """
        now = self.ledger.clock.now()
        with self._lock:
            due = any(proposal.expires_at <= now for proposal in self._pending.values())
        if not due:
            return []
        try:
            return self.ledger.expire_due()
        except LedgerError:
            return []

    def orphans(self) -> dict[str, ProposalWaiter]:
        """Pending proposals whose waiting process is gone, as of the last check."""
        with self._lock:
            return dict(self._orphans)

    def waiter(self, proposal_id: str) -> ProposalWaiter | None:
        """The process recorded as waiting on ``proposal_id`` and whether it is alive now."""
        return self.ledger.waiters([proposal_id]).get(proposal_id)

    @property
    def loaded(self) -> bool:
        """True once the initial pending set was read."""
        return self._loaded

    def pending(self) -> list[Proposal]:
        """Pending proposals, oldest first."""
        with self._lock:
            items = list(self._pending.values())
        return sorted(items, key=lambda proposal: (proposal.created_at, proposal.proposal_id))

    def get(self, proposal_id: str) -> Proposal:
        """The current state of one proposal from the ledger.

        Raises:
            ProposalNotFound: No such proposal.
        """
        return self.ledger.get(proposal_id)

    def history(self, proposal_id: str) -> list[AuditRecord]:
        """Audit records whose subject is ``proposal_id``, oldest first (one indexed read of
        the ledger, so a long audit log costs neither the start nor the detail pane)."""
        return self.ledger.audit_of(proposal_id)

    def tool_schema(self, proposal: Proposal) -> dict[str, Any] | None:
        """The parameters schema of the proposal's tool from the registry, if recorded."""
        return self.tool_schema_in(self.ledger, proposal)

    @staticmethod
    def tool_schema_in(ledger: ApprovalLedger, proposal: Proposal) -> dict[str, Any] | None:
        """:meth:`tool_schema` on any ledger (the CLI's ``proposals edit`` checks with it).

        The registry records a tool as ``{"name", "description", "parameters"}``; the
        parameters are the JSON Schema an edit is checked against.
        """
        for tool in ledger.list_tools(proposal.owner or None):
            if tool.name == proposal.tool_name and tool.schema_hash == proposal.tool_schema_hash:
                parameters = tool.json_schema.get("parameters")
                return dict(parameters) if isinstance(parameters, dict) and parameters else None
        return None

    def identical_pending(self, proposal: Proposal) -> list[Proposal]:
        """Pending proposals with the same tool and args hash (itself included).

        A call from another runtime (Claude Code, an MCP gateway, an ACP agent) is batched only
        with its twins of the same assistant turn (same runtime, session and turn): approving
        one never approves what a later turn asked for. One whose turn is unknown has no twin.
        """
        return [
            other
            for other in self.pending()
            if other.tool_name == proposal.tool_name
            and other.args_hash == proposal.args_hash
            and same_turn(other, proposal)
        ]

    # -- the rendered guard ---------------------------------------------------------------

    def confirm_rendered(self, proposal: Proposal, rendered_lines: list[str]) -> RenderedGuard:
        """Issue a guard once the UI reports the exact lines it laid out for ``proposal``.

        Raises:
            RenderGuardMissing: The lines are not the full rendering of its arguments.
        """
        expected = render_arguments(proposal.arguments)
        if list(rendered_lines) != expected:
            raise RenderGuardMissing(
                proposal.proposal_id, "the rendered arguments differ from the stored ones"
            )
        guard = RenderedGuard.issue(
            proposal.proposal_id, proposal.args_hash, rendered_digest(expected)
        )
        with self._lock:
            self._guards[proposal.proposal_id] = guard
        return guard

    def has_guard(self, proposal_id: str) -> bool:
        """True when the arguments of ``proposal_id`` were confirmed as rendered."""
        with self._lock:
            return proposal_id in self._guards

    def check_guard(self, proposal: Proposal, guard: RenderedGuard | None) -> None:
        """Refuse unless ``guard`` was issued here for exactly ``proposal``'s arguments.

        Raises:
            RenderGuardMissing: No valid guard for this proposal and args hash.
        """
        with self._lock:
            issued = self._guards.get(guard.proposal_id) if guard else None
        if guard is None or issued is None or issued.token != guard.token:
            raise RenderGuardMissing(proposal.proposal_id, "the arguments were not rendered yet")
        if guard.args_hash != proposal.args_hash or guard.proposal_id != proposal.proposal_id:
            raise RenderGuardMissing(proposal.proposal_id, "the rendered arguments are different")

    # -- decisions ------------------------------------------------------------------------

    def _kwargs(self) -> dict[str, Any]:
        context = self.identity.context
        return {"context": context, "via": context.via}

    def approve(
        self, proposal_id: str, guard: RenderedGuard | None, reason: str | None = None
    ) -> Proposal:
        """Approve after checking the rendered guard.

        Raises:
            RenderGuardMissing: No valid guard for this proposal and args hash.
            ApprovalAlreadyDecided: Another approver won (names who and when).
            ApprovalExpired, ProposalNotFound, SelfApprovalForbidden, ApproverNotAllowed.
        """
        proposal = self.ledger.get(proposal_id)
        self.check_guard(proposal, guard)
        return self.ledger.approve(proposal_id, self.identity.approver_id, reason, **self._kwargs())

    def approve_batch(
        self, proposal_ids: list[str], guard: RenderedGuard | None, reason: str | None = None
    ) -> BatchResult:
        """Approve several identical proposals (same tool and args hash) under one guard."""
        if guard is None:
            raise RenderGuardMissing(proposal_ids[0], "the arguments were not rendered yet")
        # One check for the batch: approving the first twin must not void the others' guard.
        rendered = self.ledger.get(guard.proposal_id)
        self.check_guard(rendered, guard)
        twins = [self.ledger.get(proposal_id) for proposal_id in proposal_ids]
        for twin in twins:
            if twin.args_hash != guard.args_hash:
                raise RenderGuardMissing(twin.proposal_id, "it differs from the one rendered")
            if not same_turn(twin, rendered):
                raise RenderGuardMissing(
                    twin.proposal_id, "it belongs to another assistant turn than the one rendered"
                )
        approved: list[Proposal] = []
        failed: list[LedgerError] = []
        for twin in twins:
            try:
                approved.append(
                    self.ledger.approve(
                        twin.proposal_id, self.identity.approver_id, reason, **self._kwargs()
                    )
                )
            except LedgerError as error:
                failed.append(error)
        return BatchResult(tuple(approved), tuple(failed))

    def reject(self, proposal_id: str, reason: str) -> Proposal:
        """Reject with a reason (no guard needed: rejecting never runs anything)."""
        return self.ledger.reject(proposal_id, self.identity.approver_id, reason, **self._kwargs())

    def cancel(self, proposal_id: str, reason: str | None = None) -> Proposal:
        """Withdraw a pending proposal."""
        return self.ledger.cancel(proposal_id, self.identity.approver_id, reason, **self._kwargs())

    def extend(self, proposal_id: str, seconds: float | None = None) -> Proposal:
        """Push back a live proposal's expiry by ``seconds``.

        Without ``seconds`` the settings' ``extend_seconds`` applies, shortened to what the
        ledger's lifetime limit still allows; an explicit ``seconds`` is applied exactly or
        refused.

        Raises:
            InvalidExtension: ``seconds`` is not a positive, finite number, or passes the
                limit (``extension_beyond_limit``; also with the default once the limit is
                reached).
            ApprovalAlreadyDecided, ApprovalExpired, ProposalNotFound, ApproverNotAllowed.
        """
        return self.ledger.extend(
            proposal_id,
            self.settings.extend_seconds if seconds is None else seconds,
            self.identity.approver_id,
            "extended from the supervisor",
            up_to_limit=seconds is None,
            **self._kwargs(),
        )

    def edit(
        self,
        proposal_id: str,
        new_arguments: Mapping[str, Any],
        guard: RenderedGuard | None,
        reason: str | None = None,
    ) -> EditResult:
        """Supersede a pending proposal with new arguments (the new one needs approval)."""
        old = self.ledger.get(proposal_id)
        self.check_guard(old, guard)
        new = self.ledger.edit(
            proposal_id, dict(new_arguments), self.identity.approver_id, reason, **self._kwargs()
        )
        return EditResult(old=old, new=new, diff=diff_arguments(old.arguments, new.arguments))
