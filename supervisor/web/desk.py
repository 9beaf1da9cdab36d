"""The decision desk: what a decision page shows and the checks a web decision passes.

Showing a page renders the proposal's arguments with the TUI's :func:`render_arguments` and asks
the operator's :class:`ApprovalsService` for a rendered guard over exactly those lines; the page
is remembered in the session with the time it was shown. A decision must name that page, the
args hash it showed (which must still be the proposal's), come at least the settle time after
it was shown, and then goes through the same service and ledger calls as the TUI's, as the
operator with ``via="web"``. A page decides once.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from supervisor.ledger.errors import ApprovalAlreadyDecided, ApprovalExpired
from supervisor.ledger.models import ApproverContext, Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.approvals import ApprovalsService
from supervisor.services.identity import ApproverIdentity
from supervisor.services.rendering import render_arguments
from supervisor.web.errors import DecidedTooSoon, LinkStale, PageNotShown, ReasonMissing
from supervisor.web.sessions import PageView, Session

MIN_HASH_PREFIX = 12
"""A decision link names at least this many hex characters of the args hash."""

DecisionAction = Literal["approve", "reject"]


@dataclass(frozen=True)
class ShownPage:
    """A proposal as its decision page shows it, and the view a decision must name."""

    proposal: Proposal
    argument_lines: list[str]
    target_lines: list[str]
    view: PageView | None


def hash_matches_link(proposal: Proposal, given: str) -> bool:
    """Whether a link's ``h`` (a prefix of at least :data:`MIN_HASH_PREFIX`) is the args hash."""
    given = given.strip().lower()
    return len(given) >= MIN_HASH_PREFIX and proposal.args_hash.startswith(given)


class DecisionDesk:
    """Decision pages and web decisions over one ledger.

    Args:
        ledger: The shared ledger.
        settle_seconds: Least time between showing a page and deciding from it (the TUI's
            ``decision_settle_seconds``).
        clock: Monotonic seconds.
    """

    def __init__(
        self,
        ledger: ApprovalLedger,
        settle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ledger = ledger
        self.settle_seconds = settle_seconds
        self.clock = clock
        self._services: dict[str, ApprovalsService] = {}
        self._lock = threading.Lock()

    def service(self, operator: str) -> ApprovalsService:
        """The approvals service that decides as ``operator`` (one per operator)."""
        with self._lock:
            service = self._services.get(operator)
            if service is None:
                identity = ApproverIdentity(
                    approver_id=operator, instance_id="", context=ApproverContext.current("web")
                )
                service = self._services[operator] = ApprovalsService(self.ledger, identity)
            return service

    def pending(self) -> list[Proposal]:
        """Pending proposals, oldest first."""
        found: list[Proposal] = []
        cursor: str | None = None
        while True:
            page = self.ledger.list(status=ProposalStatus.PENDING, limit=500, cursor=cursor)
            found.extend(page.items)
            cursor = page.next_cursor
            if cursor is None:
                return sorted(
                    found, key=lambda proposal: (proposal.created_at, proposal.proposal_id)
                )

    def show(self, session: Session, proposal_id: str, link_hash: str) -> ShownPage:
        """The decision page of ``proposal_id`` for ``session``.

        A pending, unexpired proposal gets a guard and a view the decision must name; any other
        is shown without one (nothing can be decided from it).

        Raises:
            ProposalNotFound: No such proposal.
            LinkStale: ``link_hash`` is not (a prefix of) the proposal's args hash.
        """
        proposal = self.ledger.get(proposal_id)
        if not hash_matches_link(proposal, link_hash):
            raise LinkStale(proposal_id)
        lines = render_arguments(proposal.arguments)
        target = render_arguments(proposal.execution_target) if proposal.execution_target else []
        view: PageView | None = None
        decidable = proposal.status is ProposalStatus.PENDING
        if decidable and proposal.expires_at > self.ledger.clock.now():
            guard = self.service(session.operator).confirm_rendered(proposal, lines)
            view = PageView(
                view_id=secrets.token_urlsafe(16), proposal_id=proposal.proposal_id,
                args_hash=proposal.args_hash, guard=guard, shown_at=self.clock(),
            )  # fmt: skip
            session.remember(view)
        return ShownPage(proposal, lines, target, view)

    def decide(
        self,
        session: Session,
        proposal_id: str,
        *,
        view_id: str,
        args_hash: str,
        action: DecisionAction,
        reason: str,
    ) -> Proposal:
        """Approve or reject ``proposal_id`` from the page ``view_id`` of ``session``.

        Raises:
            ProposalNotFound: No such proposal.
            ApprovalAlreadyDecided: It is no longer pending (decided, edited, expired).
            ApprovalExpired: Its expiry passed.
            LinkStale: ``args_hash`` is not the proposal's current args hash.
            PageNotShown: This session was not shown that page, or already decided from it.
            DecidedTooSoon: The page was shown less than the settle time ago.
            ReasonMissing: A rejection without a reason.
            Everything the ledger's approve and reject raise (policy refusals).
        """
        proposal = self.ledger.get(proposal_id)
        if proposal.status is not ProposalStatus.PENDING:
            raise ApprovalAlreadyDecided(
                proposal_id, status=proposal.status.value, by=proposal.decided_by,
                at=proposal.decided_at, wanted=f"{action}d",
            )  # fmt: skip
        if proposal.expires_at <= self.ledger.clock.now():
            raise ApprovalExpired(proposal_id, expires_at=proposal.expires_at)
        if args_hash != proposal.args_hash:
            raise LinkStale(proposal_id)
        view = session.views.get(view_id)
        if view is None or view.proposal_id != proposal_id or view.args_hash != args_hash:
            raise PageNotShown(proposal_id)
        shown_for = self.clock() - view.shown_at
        if shown_for < self.settle_seconds:
            raise DecidedTooSoon(proposal_id, shown_for, self.settle_seconds)
        reason = reason.strip()
        if action == "reject" and not reason:
            raise ReasonMissing()
        session.views.pop(view_id, None)  # a page decides once, whatever the ledger says
        service = self.service(session.operator)
        if action == "approve":
            return service.approve(proposal_id, view.guard, reason or None)
        return service.reject(proposal_id, reason)
