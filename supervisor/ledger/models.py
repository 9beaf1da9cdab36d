"""Domain models the rest of the code sees; table classes never leave ``supervisor.store``.

A proposal carries its whole lifecycle in one ``status`` (DESIGN §4): decisions
(``approved``/``rejected``/``cancelled``/``expired``/``superseded``) and execution states
(``executing``/``executed``/``failed``/``needs_reconciliation``) share one field, so lists and
filters need no join. The ``execution`` row keeps the details of the write-ahead claim.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from supervisor.ledger.identity import EnvironmentIdentity

Via = Literal["sdk", "tui", "cli", "policy", "web"]
"""The channel of a decision; ``policy`` is a rule or grant of the stored policy, ``web`` a named
operator on ``supervisor serve``."""


class ProposalStatus(StrEnum):
    """Where a proposal is in its lifecycle."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    EXECUTING = "executing"
    EXECUTED = "executed"
    FAILED = "failed"
    NEEDS_RECONCILIATION = "needs_reconciliation"

    @property
    def consumed(self) -> bool:
        """True once the proposal reached ``executing`` or later; it can never run again."""
        return self in _CONSUMED

    @property
    def terminal(self) -> bool:
        """True when nothing will ever change the proposal again (retention may purge it)."""
        return self in TERMINAL_STATUSES


_CONSUMED = frozenset(
    {
        ProposalStatus.EXECUTING,
        ProposalStatus.EXECUTED,
        ProposalStatus.FAILED,
        ProposalStatus.NEEDS_RECONCILIATION,
    }
)
TERMINAL_STATUSES = frozenset(
    {
        ProposalStatus.REJECTED,
        ProposalStatus.CANCELLED,
        ProposalStatus.EXPIRED,
        ProposalStatus.SUPERSEDED,
        ProposalStatus.EXECUTED,
        ProposalStatus.FAILED,
    }
)

ExecutionState = Literal["executing", "executed", "failed", "needs_reconciliation"]


#: Characters the ledger keeps of an approver id (its column's length; PostgreSQL refuses more).
APPROVER_ID_MAX = 200


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class ApproverContext(_Frozen):
    """What the ledger can see about whoever decided: OS user, host, pid, tty and channel."""

    os_user: str
    host: str
    pid: int
    tty: str | None = None
    via: Via = "sdk"

    @classmethod
    def current(cls, via: Via = "sdk") -> ApproverContext:
        """Capture the context of the calling process.

        The OS user is the real uid's entry in the password database, not ``LOGNAME``/``USER``
        (see :class:`~supervisor.ledger.identity.EnvironmentIdentity`).
        """
        identity = EnvironmentIdentity.current()
        tty: str | None = None
        try:
            if sys.stdin is not None and sys.stdin.isatty():
                tty = os.ttyname(sys.stdin.fileno())
        except (OSError, ValueError):
            tty = None
        return cls(os_user=identity.user, host=identity.host, pid=os.getpid(), tty=tty, via=via)


class ExecutorIdentity(_Frozen):
    """The process that claims a proposal; recovery checks whether it is still alive."""

    executor_id: str
    pid: int
    host: str

    @classmethod
    def current(cls, executor_id: str = "sdk") -> ExecutorIdentity:
        """This process, labelled ``executor_id``."""
        return cls(executor_id=executor_id, pid=os.getpid(), host=socket.gethostname())


class QuorumVote(_Frozen):
    """One approval of a proposal that needs several distinct approvers (a quorum rule).

    Attributes:
        identity: The OS identity (``user@host``) of the approving process: what makes two
            approvals distinct.
        approver_id: The approver's label.
        at: When.
    """

    identity: str
    approver_id: str
    at: datetime


#: The runtime of calls made by this SDK's own agents.
SDK_RUNTIME = "sdk"


class Proposal(_Frozen):
    """An exact, serialisable tool call waiting for (or past) a human decision.

    Supports mapping access (``proposal["proposal_id"]``, ``.get()``, ``keys()``) so code
    written against dict-shaped proposals keeps working.
    """

    proposal_id: str
    tool_name: str
    tool_schema_hash: str
    arguments: dict[str, Any]
    args_hash: str
    execution_target: dict[str, Any] = Field(default_factory=dict)
    policy_reason: str = ""
    owner: str = ""
    user: str | None = None
    thread_id: str | None = None
    checkpoint_id: str | None = None
    call_id: str | None = None
    domains: tuple[str, ...] = ()
    risk: str | None = None
    status: ProposalStatus
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    decided_at: datetime | None = None
    approver_id: str | None = None
    approver_context: ApproverContext | None = None
    decision_reason: str | None = None
    supersedes_id: str | None = None
    superseded_by_id: str | None = None
    # Set when the stored policy decided, not a person: ``rule:<name>`` or ``grant:<id>``, and
    # the policy version that did; ``approvals`` are the quorum votes cast so far; a call of a
    # tool marked never-grantable (secret reads, egress) has ``grantable`` False.
    decided_by_rule: str | None = None
    policy_version: int | None = None
    approvals_required: int = 1
    approvals: tuple[QuorumVote, ...] = ()
    grantable: bool = True
    # Which agent runtime asked: ``sdk`` (our own agents, their MCP tools' calls included),
    # ``mcp:<server>`` (the MCP gateway), ``claude-code``,
    # ``acp:<agent>``; and the assistant turn the call belongs to, where the runtime knows it
    # (batch approval never crosses a turn).
    runtime: str = Field(default=SDK_RUNTIME, max_length=200)
    turn_id: str | None = Field(default=None, max_length=200)

    @property
    def decided_by(self) -> str | None:
        """Who decided, for people: ``rule R (policy vN)``, ``grant G (policy vN)`` or the
        approver label; ``None`` while undecided."""
        if self.decided_by_rule is not None:
            kind, _, name = self.decided_by_rule.partition(":")
            return f"{kind} {name} (policy v{self.policy_version or 0})"
        return self.approver_id

    @property
    def quorum(self) -> str | None:
        """``"1 of 2 approvals"`` for a proposal that needs several approvers, else ``None``."""
        if self.approvals_required <= 1:
            return None
        return f"{len(self.approvals)} of {self.approvals_required} approvals"

    @property
    def consumed(self) -> bool:
        """True once claimed for execution; the proposal can never be executed again."""
        return self.status.consumed

    def keys(self) -> list[str]:
        """Field names, for mapping-style access."""
        return list(type(self).model_fields)

    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in type(self).model_fields

    def get(self, key: str, default: Any = None) -> Any:
        """Mapping-style ``get``."""
        return getattr(self, key) if key in type(self).model_fields else default

    def items(self) -> Iterator[tuple[str, Any]]:
        """Mapping-style ``items``."""
        return ((key, getattr(self, key)) for key in type(self).model_fields)


class Execution(_Frozen):
    """The write-ahead record of a claimed proposal."""

    proposal_id: str
    state: ExecutionState
    executor: ExecutorIdentity
    args_hash: str
    started_at: datetime
    finished_at: datetime | None = None
    outcome_status: str | None = None
    result_ref: str | None = None
    reason: str | None = None


#: What a human found a call that stopped mid-execution did: it took effect, or it did not.
ReconciledOutcome = Literal["executed", "failed"]


class Reconciliation(_Frozen):
    """A call whose executor stopped mid-call, as its audit records tell it.

    Attributes:
        flagged_at: When recovery found the executor gone (``needs_reconciliation``).
        flagged_reason: Why (which executor, pid and host stopped).
        outcome: The human's finding, once recorded (``None`` while it awaits one).
        reason: What the human checked, in their words.
        reconciled_by: The approver id that recorded the finding.
        reconciled_at: When.
    """

    proposal_id: str
    flagged_at: datetime | None = None
    flagged_reason: str | None = None
    outcome: ReconciledOutcome | None = None
    reason: str | None = None
    reconciled_by: str | None = None
    reconciled_at: datetime | None = None


class ProposalPage(_Frozen):
    """One page of a keyset-paginated proposal list."""

    items: tuple[Proposal, ...]
    next_cursor: str | None = None


class AuditRecord(_Frozen):
    """One link of the append-only, hash-chained audit log."""

    seq: int
    at: datetime
    actor: str
    action: str
    subject: str
    payload: dict[str, Any]
    prev_hash: str
    hash: str


class AuditReport(_Frozen):
    """Result of recomputing the audit chain."""

    ok: bool
    checked: int
    first_broken_seq: int | None = None
    reason: str | None = None


class Checkpoint(_Frozen):
    """Enough of an agent's state for any process to resume it."""

    checkpoint_id: str
    agent_id: str
    thread_id: str
    messages: list[Any]
    pending_tool_calls: list[Any]
    state: dict[str, Any] = Field(default_factory=dict)
    schema_version: int
    created_at: datetime


class TraceEvent(_Frozen):
    """One entry of an agent's trace (run, tool call, tool result, approval, process …)."""

    event_id: int | None = None
    at: datetime
    agent_id: str | None = None
    thread_id: str | None = None
    run_id: str | None = None
    kind: str
    tool: str | None = None
    outcome_status: str | None = None
    reason_code: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    blob_ref: str | None = None


class Blob(_Frozen):
    """Content stored once under its SHA-256 digest."""

    sha256: str
    size: int
    media_type: str
    preview: str
    content: bytes | None = None


class ToolRecord(_Frozen):
    """A registered tool: how to find and rebind it, never its code."""

    handle: str
    agent_id: str
    name: str
    import_ref: str | None = None
    description: str = ""
    json_schema: dict[str, Any] = Field(default_factory=dict)
    schema_hash: str
    domains: tuple[str, ...] = ()
    flags: dict[str, Any] = Field(default_factory=dict)


class AgentRecord(_Frozen):
    """A saved agent configuration."""

    agent_id: str
    name: str
    config: dict[str, Any] = Field(default_factory=dict)
    updated_at: datetime


class CacheEntry(_Frozen):
    """One answer of the semantic cache (see :mod:`supervisor.runtime.cache`).

    ``key`` names the agent, answer context and normalised query; ``context_hash`` is the
    answer context (:func:`supervisor.runtime.cache.answer_context`); ``embedding`` is the
    normalised query's vector when the cache has an embedder.
    """

    key: str
    agent_id: str
    context_hash: str
    query_norm: str
    answer: str
    embedding: list[float] | None = None
    hits: int = 0
    created_at: datetime
    last_hit_at: datetime | None = None


#: Process statuses of a process that is alive and keeps a heartbeat.
LIVE_PROCESS_STATUSES = ("running", "waiting_for_approval")
#: The slowest heartbeat a supervised process keeps (sandbox runs; agent runs and browser
#: workers beat every 2 s).
PROCESS_HEARTBEAT_SECONDS = 5.0
#: Heartbeats a live row may miss before it is ``lost``: 12 x 5 s = 60 s, longer than the
#: SQLite busy timeout (30 s) a heartbeat write can wait behind plus one interval, so a slow
#: write is never taken for a dead process.
LOST_AFTER_HEARTBEATS = 12
LOST_AFTER_SECONDS = PROCESS_HEARTBEAT_SECONDS * LOST_AFTER_HEARTBEATS


#: What a process can be doing (:attr:`ProcessStep.kind`).
STEP_KINDS = ("model_call", "tool_call", "waiting_for_approval", "browser_step", "sandbox_run")


class ProcessStep(_Frozen):
    """What a supervised process is doing now, as the process itself last said.

    Attributes:
        kind: One of :data:`STEP_KINDS` (a newer writer's kind is shown as written).
        detail: The model, the tool, the URL or the command the step is about (untrusted
            text: shown escaped).
        since: When the step began (elapsed time is counted from here).
        done: Steps done so far, for work with a known length (browser step N...).
        total: ... of this many at most.
        output_bytes: Output written so far (sandbox runs).
        limit_seconds: How long the step may take at most (a sandbox run's timeout).
    """

    kind: str = Field(max_length=40)
    detail: str = Field(default="", max_length=500)
    since: datetime
    done: int | None = Field(default=None, ge=0)
    total: int | None = Field(default=None, ge=0)
    output_bytes: int | None = Field(default=None, ge=0)
    limit_seconds: float | None = Field(default=None, ge=0)

    @field_validator("detail", mode="before")
    @classmethod
    def _cut(cls, value: object) -> object:
        """A long URL or command is cut to fit rather than refused: it is a display hint."""
        return value[:497] + "..." if isinstance(value, str) and len(value) > 500 else value


class ProcessRecord(_Frozen):
    """A supervised process (agent run, browser worker, sandbox run).

    ``lease_expires_at`` is the deadline of the process's lease: each heartbeat of a live
    process moves it to the heartbeat plus the process's lease length, a final status releases
    it (``None``). A live process past its deadline is ``lost``, since ``lost_at``.
    """

    process_id: str
    kind: str
    pid: int | None = None
    host: str
    command: str = ""
    status: str
    started_at: datetime
    heartbeat_at: datetime
    exit_code: int | None = None
    lease_expires_at: datetime | None = None
    lost_at: datetime | None = None
    log_path: str | None = None
    step: ProcessStep | None = None

    def alive_at(self, now: datetime) -> bool:
        """True while the process is live and its lease (or, without one, heartbeat) holds."""
        if self.status not in LIVE_PROCESS_STATUSES:
            return False
        if self.lease_expires_at is not None:
            return self.lease_expires_at >= now
        return (now - self.heartbeat_at).total_seconds() <= LOST_AFTER_SECONDS


class Lease(_Frozen):
    """A named resource held by one holder until ``expires_at``.

    ``taken_over_from`` names the previous holder when this acquisition took an expired lease.
    """

    resource: str
    holder: str
    acquired_at: datetime
    expires_at: datetime
    taken_over_from: str | None = None


#: Statuses in which a proposal still needs the process waiting on it.
WAITED_STATUSES = frozenset({ProposalStatus.PENDING, ProposalStatus.APPROVED})


class ProposalWaiter(_Frozen):
    """Which process waits on a proposal, and whether it is still alive.

    ``process`` is ``None`` when the waiter's process row is gone (purged); ``alive`` is the
    answer to "can the process that waits on this proposal still act on it?".
    """

    proposal_id: str
    process_id: str
    since: datetime
    process: ProcessRecord | None = None
    alive: bool

    @property
    def gone_since(self) -> datetime | None:
        """When the waiter stopped: lost at its lease deadline, or its last heartbeat."""
        if self.alive or self.process is None:
            return None
        return self.process.lost_at or self.process.lease_expires_at or self.process.heartbeat_at

    @property
    def process_state(self) -> str | None:
        """The waiter's process status, ``lost`` once its lease ran out even if not yet marked."""
        if self.process is None:
            return None
        if not self.alive and self.process.status in LIVE_PROCESS_STATUSES:
            return "lost"
        return self.process.status

    def orphans(self, proposal: Proposal) -> bool:
        """True when ``proposal`` still needs this waiter (pending or approved) and it is gone."""
        return not self.alive and proposal.status in WAITED_STATUSES

    def summary(self) -> dict[str, Any]:
        """JSON data for the CLI and the MCP view: who waits, alive or gone since when."""
        process = self.process
        gone = self.gone_since
        return {
            "process_id": self.process_id,
            "since": self.since.isoformat(),
            "alive": self.alive,
            "process_status": self.process_state,
            "pid": process.pid if process is not None else None,
            "host": process.host if process is not None else None,
            "gone_since": gone.isoformat() if gone is not None else None,
        }

    def describe(self) -> str:
        """One line: ``process run-1 (pid 42@host) alive`` or ``... gone (lost) since T``."""
        process = self.process
        where = f" (pid {process.pid}@{process.host})" if process and process.pid else ""
        if self.alive:
            return f"process {self.process_id}{where} alive"
        status = self.process_state or "no longer recorded"
        gone = self.gone_since
        when = f" since {gone.isoformat(timespec='seconds')}" if gone is not None else ""
        return f"process {self.process_id}{where} gone ({status}){when}"


class PurgeReport(_Frozen):
    """What a retention run removed."""

    purged: int
    proposal_ids: tuple[str, ...] = ()
    archive_path: str | None = None
