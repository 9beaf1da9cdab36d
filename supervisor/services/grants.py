"""Grants in the supervisor: "approve and allow similar", the grants list and revoking.

The pure part says what the operator may pick for each argument of a pending call
(:func:`pattern_options`: keep it exact, or a path prefix, URL origin or number range with a
prefilled value), reads what they typed (:func:`pattern_from_text`) and lists the other pending
proposals the chosen patterns would allow (:func:`similar_pending`, the same match the ledger
applies to later calls). :class:`GrantsService` makes grants with this supervisor's identity
(after the rendered guard, like every approval), approves the listed proposals one by one
through the normal approve path, keeps the grants list and refreshes it when the inbox's feed
carries a grant record (made, used, revoked).
"""

from __future__ import annotations

import json
import math
import posixpath
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from supervisor.errors import SupervisorError
from supervisor.ledger.decide import check_grantable
from supervisor.ledger.errors import GrantRefused, LedgerError
from supervisor.ledger.grants import Grant, GrantScope, target_hash
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.rules.grants import GrantInvalid, check_patterns
from supervisor.services.approvals import ApprovalsService, InboxChange
from supervisor.services.guard import RenderedGuard
from supervisor.services.listeners import Listeners

PatternKind = Literal["exact", "prefix", "origin", "range"]
KIND_LABELS: dict[PatternKind, str] = {
    "exact": "exact value",
    "prefix": "path prefix",
    "origin": "URL origin",
    "range": "number range",
}


@dataclass(frozen=True)
class PatternOption:
    """One way to hold an argument in a grant, with the value the operator starts from."""

    kind: PatternKind
    prefill: str

    @property
    def label(self) -> str:
        return KIND_LABELS[self.kind]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _directory(path: str) -> str:
    """``/srv/app/a.txt`` -> ``/srv/app/``; a top-level path is its own directory."""
    parent = posixpath.dirname(path.rstrip("/"))
    if parent in ("", "/"):
        return path.rstrip("/") + "/"
    return parent.rstrip("/") + "/"


def _origin(url: str) -> str | None:
    try:
        split = urlsplit(url)
        port = split.port
    except ValueError:
        return None
    if split.scheme not in ("http", "https") or not split.hostname:
        return None
    return f"{split.scheme}://{split.hostname}" + (f":{port}" if port else "")


def pattern_options(value: Any) -> list[PatternOption]:
    """What an argument with ``value`` may become in a grant; exact is always first.

    A string starting with ``/`` may become its directory, an http(s) URL its origin, a number
    the range from 0 to it.
    """
    options = [PatternOption("exact", json.dumps(value, ensure_ascii=False))]
    if isinstance(value, str) and value.startswith("/") and value.strip("/"):
        options.append(PatternOption("prefix", _directory(value)))
    if isinstance(value, str):
        origin = _origin(value)
        if origin is not None:
            options.append(PatternOption("origin", origin))
    if _number(value):
        low, high = sorted((0, value))
        options.append(PatternOption("range", f"{json.dumps(low)}..{json.dumps(high)}"))
    return options


def pattern_from_text(name: str, kind: PatternKind, text: str) -> dict[str, Any] | None:
    """The pattern the operator typed for argument ``name`` (``None``: keep it exact).

    Raises:
        GrantInvalid: A range that is not ``LOW..HIGH`` numbers.
    """
    if kind == "exact":
        return None
    if kind in ("prefix", "origin"):
        return {kind: text.strip()}
    low, dots, high = text.partition("..")
    try:
        bounds = [json.loads(low), json.loads(high)] if dots else None
    except ValueError:
        bounds = None
    if bounds is None or not all(map(_number, bounds)):
        raise GrantInvalid(f"argument {name!r}: a range is LOW..HIGH numbers")
    return {"range": bounds}


def similar_pending(
    source: Proposal,
    patterns: Mapping[str, Any],
    pending: Iterable[Proposal],
    *,
    any_agent: bool = False,
) -> list[Proposal]:
    """The other pending proposals a grant made from ``source`` would allow.

    The ledger's own test for a later call: the same tool, schema hash and execution target,
    the same agent unless ``any_agent``, a grantable tool, no quorum, and arguments matching
    the checked ``patterns`` (:func:`supervisor.rules.grants.check_patterns`).
    """
    scope = GrantScope(
        source.tool_name, source.tool_schema_hash, target_hash(source.execution_target),
        "" if any_agent else source.owner, patterns,
    )  # fmt: skip
    return [
        other
        for other in pending
        if other.proposal_id != source.proposal_id
        and other.status is ProposalStatus.PENDING
        and other.grantable
        and other.approvals_required <= 1
        and scope.covers_proposal(other)
    ]


class GrantNotForQuorum(SupervisorError):
    """A proposal that needs several approvers cannot be turned into a grant."""

    code = "grant_not_for_quorum"

    def __init__(self, proposal: Proposal) -> None:
        super().__init__(
            f"No grant was made: {proposal.tool_name} needs {proposal.approvals_required} "
            "distinct approvers (a quorum rule), and a grant would let one person allow it.",
            hint="Approve it with a, and ask another approver to approve it too.",
        )


class NoLongerSimilar(SupervisorError):
    """A proposal listed as matched by a grant changed or left the inbox before approval."""

    code = "no_longer_similar"

    def __init__(self, proposal_id: str) -> None:
        super().__init__(
            f"Proposal {proposal_id[:12]} no longer matches the grant (decided, edited or "
            "expired meanwhile); it was not approved."
        )


def grant_refusal(proposal: Proposal) -> SupervisorError | None:
    """Why no grant can be made from ``proposal`` (checked before the dialog opens), or None."""
    if not proposal.grantable:
        return GrantRefused(
            proposal.proposal_id,
            f"{proposal.tool_name} is marked never-grantable (secret reads, egress): "
            "approve each call on its own",
        )
    if proposal.approvals_required > 1:
        return GrantNotForQuorum(proposal)
    return None


@dataclass(frozen=True)
class GrantRequest:
    """What the operator chose in the "approve and allow similar" dialog.

    Attributes:
        proposal_id: The pending call the grant is made from (approved with it).
        patterns: Argument name -> pattern; arguments not named stay exact.
        seconds, max_uses: The grant's lifetime and use cap.
        any_agent: Also for other agents' calls.
        reason: Why (audited, shown on every call it allows).
        also_approve: Other pending proposals the grant matches, listed to the operator and
            chosen to be approved now too.
    """

    proposal_id: str
    patterns: dict[str, Any]
    seconds: float
    max_uses: int
    any_agent: bool = False
    reason: str | None = None
    also_approve: tuple[str, ...] = ()


@dataclass(frozen=True)
class SimilarResult:
    """The approved proposal, its grant, and how the listed others fared."""

    proposal: Proposal
    grant: Grant
    approved: tuple[Proposal, ...] = ()
    failed: tuple[SupervisorError, ...] = ()


@dataclass(frozen=True)
class GrantsChange:
    """The grants as of a refresh, newest first (live and past)."""

    grants: tuple[Grant, ...]


def _about_grants(records: Iterable[Any]) -> bool:
    return any(
        record.subject.startswith("grant:") or "grant_id" in record.payload for record in records
    )


class GrantsService:
    """Grants made from this supervisor, and the grants list it shows.

    Args:
        approvals: The inbox: its ledger, identity, render guards and pending set; its feed
            thread tells this service when a grant record arrives.
    """

    def __init__(self, approvals: ApprovalsService) -> None:
        self.approvals = approvals
        self.ledger = approvals.ledger
        self.identity = approvals.identity
        self._lock = threading.Lock()
        self._grants: tuple[Grant, ...] = ()
        self._listeners: Listeners[GrantsChange] = Listeners()

    # -- the list -------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[GrantsChange], None]) -> None:
        """Call ``listener`` (from a background thread) after every refresh."""
        self._listeners.subscribe(listener)

    def unsubscribe(self, listener: Callable[[GrantsChange], None]) -> None:
        self._listeners.unsubscribe(listener)

    def start(self) -> None:
        """Follow the inbox's feed for grant records."""
        self.approvals.subscribe(self._on_inbox)

    def stop(self) -> None:
        self.approvals.unsubscribe(self._on_inbox)

    def _on_inbox(self, change: InboxChange) -> None:
        if _about_grants(change.grants):
            self.refresh()

    def refresh(self) -> GrantsChange:
        """Re-read every grant and publish the list."""
        change = GrantsChange(tuple(self.ledger.grants()))
        with self._lock:
            self._grants = change.grants
        self._listeners.publish(change)
        return change

    def grants(self) -> list[Grant]:
        """The grants as of the last refresh, newest first."""
        with self._lock:
            return list(self._grants)

    def revoke(self, grant_id: str, reason: str = "revoked from the supervisor") -> Grant:
        """Revoke a grant now (audited with this supervisor's identity).

        Raises:
            GrantNotFound: No grant has that id.
        """
        grant = self.ledger.revoke_grant(
            grant_id, self.identity.approver_id, reason, via=self.identity.context.via
        )
        self.refresh()
        return grant

    # -- approve and allow similar ---------------------------------------------------------

    def approve_similar(self, request: GrantRequest, guard: RenderedGuard | None) -> SimilarResult:
        """Approve the proposal, make the grant, then approve the listed others one by one.

        Everything about the grant is checked before anything changes: the rendered guard,
        the patterns, grantability, the lifetime and use cap (the ledger checks the approval
        policy before approving). A listed proposal that no longer matches is not approved.

        Raises:
            RenderGuardMissing, GrantRefused, GrantInvalid, GrantNotForQuorum, and everything
            ``ApprovalLedger.approve_similar`` raises.
        """
        proposal = self.ledger.get(request.proposal_id)
        self.approvals.check_guard(proposal, guard)
        refusal = grant_refusal(proposal)
        if refusal is not None:
            raise refusal
        check_grantable(proposal, seconds=request.seconds, max_uses=request.max_uses)
        checked = check_patterns(request.patterns, proposal.arguments)
        context = self.identity.context
        approved, grant = self.ledger.approve_similar(
            proposal.proposal_id, self.identity.approver_id, patterns=request.patterns,
            seconds=request.seconds, max_uses=request.max_uses, any_agent=request.any_agent,
            reason=request.reason, context=context, via=context.via,
        )  # fmt: skip
        others: list[Proposal] = []
        failed: list[SupervisorError] = []
        for proposal_id in request.also_approve:
            try:
                other = self.ledger.get(proposal_id)
                if not similar_pending(proposal, checked, [other], any_agent=request.any_agent):
                    raise NoLongerSimilar(proposal_id)
                others.append(
                    self.ledger.approve(
                        proposal_id, self.identity.approver_id,
                        f"approved with grant {grant.grant_id[:12]} (batch by template)",
                        context=context, via=context.via,
                    )
                )  # fmt: skip
            except (LedgerError, NoLongerSimilar) as error:
                failed.append(error)
        return SimilarResult(approved, grant, tuple(others), tuple(failed))
