"""The ledger side of an ACP session: permission requests become proposals, decisions answers.

One :class:`AcpGate` per ``supervisor acp`` process. Its methods block on the ledger, so the
asyncio relay and client call them in worker threads. A request is proposed with the policy in
force (a rule or a grant decides it at once, with no pending row), waited on through the
ledger's change feed (following an edit to the live end of its chain), and answered with one of
the agent's own option ids (:mod:`supervisor.acp.permission`). An allowed call is claimed
(``executing``) before the agent hears "allow", and finished when the agent reports the tool
call ``completed`` or ``failed``; one the agent never reports on is left for reconciliation
once this process is gone, never guessed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from supervisor.acp.permission import Answer, Cancelled, PermissionAsk, Selected
from supervisor.canonical import canonical_hash
from supervisor.ledger.chain import live_end
from supervisor.ledger.errors import LedgerError
from supervisor.ledger.identity import EnvironmentIdentity
from supervisor.ledger.models import ProcessStep, Proposal, ProposalStatus, TraceEvent
from supervisor.ledger.service import ApprovalLedger

GATE_ACTOR = "supervisor:acp"
WAIT_SLICE_SECONDS = 0.5
_S = ProposalStatus
_log = logging.getLogger(__name__)

Echo = Callable[[str], object]


def schema_hash_of(tool_name: str) -> str:
    """The contract hash of an ACP tool kind (ACP tool calls carry no schema)."""
    return canonical_hash({"protocol": "acp", "request": "session/request_permission",
                           "tool": tool_name})  # fmt: skip


@dataclass(frozen=True)
class Decided:
    """How one permission request ended: the answer sent and the proposal behind it."""

    answer: Answer
    proposal: Proposal


class AcpGate:
    """Turns an ACP agent's permission requests into ledger proposals and back.

    Args:
        ledger: The approval ledger.
        agent_name: The agent's name; the runtime is ``acp:<agent_name>``.
        process_id: This process's row in the process table (its status shows the waits).
        decision_timeout: Seconds to wait for a person before withdrawing the proposal
            (``None``: until the proposal expires).
        ttl_seconds: Expiry of the proposals (``None``: the ledger's default).
        echo: Where progress lines go (stderr; never the protocol stream).

    The proposals' ``user`` is this process's OS identity (``user@host``): the agent acts for
    whoever runs it, so ``forbid_self_approval`` and rules on ``users`` apply to them.
    """

    def __init__(
        self,
        ledger: ApprovalLedger,
        agent_name: str,
        *,
        process_id: str | None = None,
        decision_timeout: float | None = None,
        ttl_seconds: float | None = None,
        echo: Echo = lambda line: None,
    ) -> None:
        self.ledger = ledger
        self.agent_name = agent_name
        self.runtime = f"acp:{agent_name}"[:200]
        self.process_id = process_id
        self.decision_timeout = decision_timeout
        self.ttl_seconds = ttl_seconds
        self.echo = echo
        identity = EnvironmentIdentity.current()
        self.user = f"{identity.user}@{identity.host}"
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._pending: dict[str, tuple[str, str]] = {}  # proposal id -> (session, tool call)
        self._executing: dict[tuple[str, str], str] = {}  # (session, tool call) -> proposal id
        self._cancelled: set[str] = set()  # sessions whose prompt the client cancelled

    def decide(self, ask: PermissionAsk, *, turn_id: str | None, cwd: str | None) -> Decided:
        """Propose the call, wait for its decision and say what to answer the agent.

        Raises:
            CanonicalJSONError: The tool call is not JSON data the ledger can hash.
        """
        proposal = self.ledger.propose(
            ask.tool_name, schema_hash_of(ask.tool_name), ask.arguments,
            execution_target=self._target(ask, cwd), policy_reason=_reason(self, ask),
            owner=self.runtime, user=self.user, thread_id=ask.session_id, call_id=ask.tool_call_id,
            domains=("acp",), ttl_seconds=self.ttl_seconds, runtime=self.runtime,
            turn_id=turn_id,
        )  # fmt: skip
        self._trace(proposal, proposal.status.value)
        if proposal.status is _S.PENDING:
            proposal = self._wait(ask, proposal)
        elif proposal.decided_by is not None:
            self.echo(
                f"[acp] {proposal.tool_name}: {proposal.status.value} by {proposal.decided_by}"
            )
        answer = self._answer(ask, proposal)
        self._trace(proposal, "answered", answer=describe(answer), decision=proposal.status.value)
        return Decided(answer, proposal)

    def prompt_started(self, session_id: str) -> None:
        """A new prompt began in ``session_id``: an earlier cancel no longer applies."""
        with self._lock:
            self._cancelled.discard(session_id)

    def cancel_session(self, session_id: str) -> None:
        """The client cancelled the session's prompt: withdraw its pending proposals; their
        requests are answered ``cancelled`` (ACP requires it)."""
        with self._lock:
            self._cancelled.add(session_id)
            pending = [pid for pid, (sid, _) in self._pending.items() if sid == session_id]
        for proposal_id in pending:
            self._withdraw(proposal_id, "The ACP client cancelled the prompt.")

    def tool_status(self, session_id: str, tool_call_id: str, status: str | None) -> None:
        """The agent reported a tool call's status: finish its execution record if it ended."""
        if status not in ("completed", "failed"):
            return
        with self._lock:
            proposal_id = self._executing.pop((session_id, tool_call_id), None)
        if proposal_id is None:
            return
        try:
            if status == "completed":
                self.ledger.complete(proposal_id, "success")
            else:
                self.ledger.fail(proposal_id, reason="The ACP agent reported the call failed.")
        except LedgerError as error:  # reconciled or finished elsewhere meanwhile
            _log.info("could not finish %s: %s", proposal_id, error)

    def close(self) -> None:
        """The session ends: withdraw every proposal still pending (nobody is left to act on
        a decision) and stop the waits."""
        self._closing.set()
        with self._lock:
            pending = list(self._pending)
        for proposal_id in pending:
            self._withdraw(proposal_id, "The ACP session ended before a decision.")

    def _target(self, ask: PermissionAsk, cwd: str | None) -> dict[str, object]:
        target: dict[str, object] = {"runtime": self.runtime}
        if cwd:
            target["cwd"] = cwd
        target["options"] = [option.as_json() for option in ask.options]
        approve = ask.approve_option
        target["approve_answers"] = approve.option_id if approve is not None else None
        return target

    def _wait(self, ask: PermissionAsk, proposal: Proposal) -> Proposal:
        """Block until the proposal (or the live end of its edit chain) is decided."""
        key = (ask.session_id, ask.tool_call_id)
        with self._lock:
            self._pending[proposal.proposal_id] = key
        self._waiting(proposal)
        deadline = (
            None if self.decision_timeout is None else time.monotonic() + self.decision_timeout
        )
        cursor = self.ledger.head()
        try:
            while True:
                current = live_end(self.ledger, proposal.proposal_id)
                if current.status is not _S.PENDING:
                    return current
                with self._lock:
                    self._pending.setdefault(current.proposal_id, key)
                if current.expires_at <= self.ledger.clock.now():
                    self.ledger.expire_due()
                    continue
                if self._closing.is_set() or self._is_cancelled(ask.session_id):
                    self._withdraw(current.proposal_id, "The ACP prompt ended before a decision.")
                elif deadline is not None and time.monotonic() >= deadline:
                    self._withdraw(current.proposal_id,
                                   f"No decision within {self.decision_timeout:g}s.")  # fmt: skip
                records = self.ledger.wait_for_change(cursor, WAIT_SLICE_SECONDS)
                if records:
                    cursor = records[-1].seq
        finally:
            with self._lock:
                for proposal_id, waited in list(self._pending.items()):
                    if waited == key:
                        del self._pending[proposal_id]
                still_waiting = bool(self._pending)
            if not still_waiting:
                self._running()

    def _answer(self, ask: PermissionAsk, proposal: Proposal) -> Answer:
        """The answer for a decided proposal; an approved one is claimed first."""
        if proposal.status is not _S.APPROVED:
            if proposal.status is _S.CANCELLED and self._is_cancelled(ask.session_id):
                return Cancelled()
            answer = ask.refused()
            self.echo(f"[acp] {proposal.tool_name}: {proposal.status.value}; answering "
                      f"{describe(answer)}")  # fmt: skip
            return answer
        if proposal.arguments != ask.arguments or ask.approve_option is None:
            why = (
                "An ACP agent runs its own arguments; an edited call cannot be passed to it."
                if ask.approve_option is not None
                else "The ACP agent offered no option that allows the call."
            )
            self._revoke(proposal, why)
            return ask.refused()
        try:
            self.ledger.claim(proposal.proposal_id, proposal.args_hash)
        except LedgerError as error:  # revoked, expired or claimed meanwhile
            self.echo(f"[acp] {proposal.tool_name}: not claimed ({error.code}); answering reject")
            return ask.refused()
        with self._lock:
            self._executing[(ask.session_id, ask.tool_call_id)] = proposal.proposal_id
        answer = ask.approved()
        self.echo(f"[acp] {proposal.tool_name}: approved; answering {describe(answer)}")
        return answer

    def _is_cancelled(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._cancelled

    def _withdraw(self, proposal_id: str, reason: str) -> None:
        try:
            self.ledger.cancel(proposal_id, GATE_ACTOR, reason, via="sdk")
        except LedgerError as error:  # decided meanwhile: the wait reads that decision
            _log.info("could not withdraw %s: %s", proposal_id, error)

    def _revoke(self, proposal: Proposal, reason: str) -> None:
        try:
            self.ledger.revoke(proposal.proposal_id, GATE_ACTOR, reason, via="sdk")
        except LedgerError as error:
            _log.info("could not revoke %s: %s", proposal.proposal_id, error)

    def _trace(self, proposal: Proposal, outcome: str, **payload: str) -> None:
        """An ``approval`` trace event for the call (what the trace pane and exports show)."""
        event = TraceEvent(
            at=self.ledger.clock.now(), agent_id=self.runtime, thread_id=proposal.thread_id,
            run_id=proposal.turn_id, kind="approval", tool=proposal.tool_name,
            outcome_status=outcome,
            payload={"proposal_id": proposal.proposal_id, "call_id": proposal.call_id,
                     "args_hash": proposal.args_hash, "runtime": self.runtime, **payload},
        )  # fmt: skip
        try:
            self.ledger.append_trace([event])
        except LedgerError as error:  # the trace is evidence, never a reason to stop the call
            _log.warning("could not trace %s: %s", proposal.proposal_id, error)

    def _waiting(self, proposal: Proposal) -> None:
        self.echo(f"[acp] waiting for a decision on {proposal.proposal_id} ({proposal.tool_name})")
        if self.process_id is None:
            return
        self.ledger.record_waiters(self.process_id, [proposal.proposal_id])
        step = ProcessStep(kind="waiting_for_approval", detail=proposal.tool_name[:500],
                           since=datetime.now(UTC))  # fmt: skip
        self.ledger.heartbeat(self.process_id, status="waiting_for_approval", step=step)

    def _running(self) -> None:
        if self.process_id is None or self._closing.is_set():
            return
        step = ProcessStep(kind="model_call", detail=self.runtime, since=datetime.now(UTC))
        self.ledger.heartbeat(self.process_id, status="running", step=step)


def _reason(gate: AcpGate, ask: PermissionAsk) -> str:
    """What the approver reads: who asks and which options it offered."""
    offered = ", ".join(f"{o.name} [{o.option_id}, {o.kind}]" for o in ask.options) or "none"
    approve = ask.approve_option
    note = ""
    if approve is not None and approve.kind == "allow_always":
        note = " Approving answers its allow_always option: it may stop asking for such calls."
    return f"ACP agent {gate.agent_name} asks permission. Options offered: {offered}.{note}"


def describe(answer: Answer) -> str:
    """An answer as a progress line names it: the option id, or ``cancelled``."""
    match answer:
        case Selected(option_id=option_id):
            return f"option {option_id}"
        case Cancelled():
            return "cancelled"
