"""The MCP gateway's gate: each call of an upstream server's tool forwarded, proposed or answered.

The gateway (``supervisor mcp-gateway``) is an MCP server in front of one upstream MCP server.
This module is its synchronous core, without any MCP server types: the upstream tools are
:class:`~supervisor.mcp.tool.McpTool` objects bound to an :class:`~supervisor.mcp.gate.McpGate`
(recorded contracts, grant invalidation on a changed contract, idempotency keys), and a call
goes through the same steps as an agent's call of an MCP tool:

* arguments are validated against the tool's strict schema (a refusal is an error result);
* a tool that is read-only by the gate's rules (a trusted server's ``readOnlyHint``) and that
  the stored policy allows runs at once, unrecorded;
* anything else is proposed in the ledger (runtime ``mcp:<server>``); a rule or grant may
  decide it there and then, otherwise a person does, and once approved it is claimed (written
  ``executing`` ahead of the call) and sent upstream exactly once, with the claimed proposal's
  id as idempotency key.

A call that repeats an earlier one (same tool, same arguments hash) joins it instead of
proposing again: a pending or approved proposal is waited on and run once; a consumed one is
never run again — within ``replay_window_seconds`` of its end its recorded result (or why it
cannot be known, ``needs_reconciliation``) is returned. That is what a client that retries after
a gateway crash sees. A call re-sent with the state of an ``input_required`` answer (MCP
2026-07-28) is bound to the exact proposal that state names instead (:meth:`McpGatewayCore.resume`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from supervisor.canonical import args_hash
from supervisor.errors import SupervisorError
from supervisor.ledger.chain import live_end
from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import ExecutorIdentity, Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.mcp.config import McpServerConfig
from supervisor.mcp.connection import McpCallResult, McpToolSpec
from supervisor.mcp.gate import McpGate
from supervisor.mcp.tool import ARGS_HASH_META_KEY, McpCaller, McpTool
from supervisor.outcomes.blobref import BlobRef
from supervisor.rules.model import CallFacts
from supervisor.tools.contract import PreparedCall, ToolCallResult
from supervisor.tools.errors import ToolCallError

_S = ProposalStatus
_log = logging.getLogger(__name__)
GATEWAY_OWNER_PREFIX = "mcp-gateway:"
DEFAULT_REPLAY_WINDOW_SECONDS = 600.0
_OPEN = (_S.PENDING, _S.APPROVED)
_CONSUMED = (_S.EXECUTING, _S.EXECUTED, _S.FAILED, _S.NEEDS_RECONCILIATION)
_MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class GatewayResult:
    """What the gateway answers a ``tools/call`` with (plain data, MCP ``CallToolResult`` shape).

    Attributes:
        content: Content blocks as JSON data (``{"type": "text", "text": ...}`` ...).
        structured: ``structuredContent``, if any.
        is_error: The call failed or did not run.
        proposal_id: The proposal that decided the call, if one did.
    """

    content: tuple[dict[str, Any], ...]
    structured: Any = None
    is_error: bool = False
    proposal_id: str | None = None

    @classmethod
    def error(cls, message: str, proposal_id: str | None = None) -> GatewayResult:
        """A tool result with ``isError`` true and one text block saying why."""
        return cls(({"type": "text", "text": message},), None, True, proposal_id)

    def to_json(self) -> dict[str, Any]:
        """As stored in the ledger (the result blob of an executed proposal)."""
        return {"content": list(self.content), "structured": self.structured,
                "is_error": self.is_error}  # fmt: skip

    @classmethod
    def from_json(cls, data: Any, proposal_id: str) -> GatewayResult | None:
        """A stored result (see :meth:`to_json`); ``None`` for anything else."""
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            return None
        blocks = tuple(block for block in data["content"] if isinstance(block, dict))
        return cls(blocks, data.get("structured"), bool(data.get("is_error")), proposal_id)


@dataclass(frozen=True)
class Forward:
    """Run now, unrecorded: a read-only tool the policy allows."""

    tool: McpTool
    prepared: PreparedCall


@dataclass(frozen=True)
class Wait:
    """Wait for a decision on ``proposal`` (it may already be decided), then :meth:`finish`."""

    tool: McpTool
    proposal: Proposal
    joined: bool = False


@dataclass(frozen=True)
class Answer:
    """Answer at once with ``result``; nothing is sent upstream."""

    result: GatewayResult


Step = Forward | Wait | Answer


class RecordingCaller:
    """The upstream connection, remembering each call's full result by its arguments hash.

    :class:`McpTool` turns a result into model-facing data; the gateway forwards the upstream's
    own content blocks instead, so it reads them back here after the tool ran.
    """

    def __init__(self, caller: McpCaller) -> None:
        self.caller = caller
        self._results: dict[str, McpCallResult] = {}
        self._lock = threading.Lock()

    def list_tools(self) -> list[McpToolSpec]:
        """Every tool the upstream lists now."""
        return self.caller.list_tools()

    def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> McpCallResult:
        """One ``tools/call`` upstream; its result is kept for :meth:`take`."""
        result = self.caller.call_tool(name, arguments, meta)
        key = str((meta or {}).get(ARGS_HASH_META_KEY, ""))
        with self._lock:
            self._results[key] = result
        return result

    def take(self, expected_args_hash: str) -> McpCallResult | None:
        """The result of the call with that arguments hash, once."""
        with self._lock:
            return self._results.pop(expected_args_hash, None)


def gateway_owner(server_name: str) -> str:
    """The owner (agent id) of a gateway's proposals: ``mcp-gateway:<server>``."""
    return f"{GATEWAY_OWNER_PREFIX}{server_name}"


class McpGatewayCore:
    """One upstream server's tools behind the durable gate, for one gateway process.

    Args:
        ledger: The approval ledger.
        config: The upstream server (name, transport, trust).
        caller: The live upstream connection.
        replay_window_seconds: How long after a consumed proposal ended an identical call
            returns its recorded result instead of being proposed again (0: never).
        ttl_seconds: Expiry of the gateway's proposals (default: the ledger's).
    """

    def __init__(
        self,
        ledger: ApprovalLedger,
        config: McpServerConfig,
        caller: McpCaller,
        *,
        replay_window_seconds: float = DEFAULT_REPLAY_WINDOW_SECONDS,
        ttl_seconds: float | None = None,
    ) -> None:
        self.ledger = ledger
        self.config = config
        self.caller = RecordingCaller(caller)
        self.owner = gateway_owner(config.name)
        self.gate = McpGate(ledger, self.owner)
        self.replay_window = timedelta(seconds=max(replay_window_seconds, 0.0))
        self.ttl_seconds = ttl_seconds
        self.executor = ExecutorIdentity.current(self.owner)
        self._tools: dict[str, McpTool] = {}
        self._listed: tuple[McpToolSpec, ...] = ()
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()

    # -- tools -----------------------------------------------------------------------------

    def refresh(self) -> bool:
        """List the upstream's tools now, record their contracts and invalidate stale grants.

        Returns:
            True when the listing differs from the previous one (names, schemas, annotations
            or descriptions), so the gateway's client should list again.
        """
        with self._refreshing:  # one at a time: a change is recorded and announced once
            return self._refresh()

    def _refresh(self) -> bool:
        specs = self.caller.list_tools()
        tools: dict[str, McpTool] = {}
        for spec in specs:
            try:
                tools[spec.name] = McpTool(self.caller, self.config, spec, gate=self.gate)
            except SupervisorError as exc:  # cannot be governed, so not offered at all
                _log.warning("MCP tool %s of %s not offered: %s", spec.name, self.config.name, exc)
        self.gate.sync(tools.values())
        listed = tuple(spec for spec in specs if spec.name in tools)
        with self._lock:
            changed = bool(self._listed) and listed != self._listed
            self._tools, self._listed = tools, listed
        return changed

    def listed(self) -> tuple[McpToolSpec, ...]:
        """The upstream tools the gateway offers, as last listed."""
        with self._lock:
            return self._listed

    def tool(self, name: str) -> McpTool | None:
        """The offered tool with that upstream name."""
        with self._lock:
            return self._tools.get(name)

    # -- one call --------------------------------------------------------------------------

    def begin(self, name: str, arguments: Any) -> Step:
        """Validate a call and say what happens to it (nothing is sent upstream here)."""
        tool = self.tool(name)
        if tool is None:  # listed upstream since the client last asked, perhaps
            self.refresh()
            tool = self.tool(name)
        if tool is None:
            return Answer(GatewayResult.error(f"Unknown tool {name!r} on {self.config.name}."))
        try:
            prepared = tool.prepare(arguments if arguments is not None else {})
        except ToolCallError as error:
            return Answer(GatewayResult.error(f"[{error.code}] {error.message}"))
        facts = CallFacts(
            tool=tool.name, arguments=prepared.arguments, domains=tool.policy.domains,
            agent=self.owner, user=None, target=dict(tool.execution_target or {}),
            read_only=tool.policy.read_only,
        )  # fmt: skip
        outcome = self.ledger.decide_call(
            facts, schema_hash=tool.schema_hash, grantable=tool.policy.grantable
        )
        if outcome.decision.verdict == "allow" and tool.policy.read_only:
            return Forward(tool, prepared)
        expected = self._args_hash(tool, prepared.arguments)
        with contextlib.suppress(LedgerError):
            self.ledger.recover()  # a crashed gateway's executing call: needs_reconciliation
        earlier = self._earlier(tool, expected)
        if earlier is not None:
            if earlier.status in _OPEN:
                return Wait(tool, earlier, joined=True)
            return Answer(self._consumed_answer(earlier))
        proposal = self.ledger.propose(
            tool.name, tool.schema_hash, prepared.arguments,
            execution_target=tool.execution_target,
            policy_reason=tool.policy.approval_reason or "", owner=self.owner,
            domains=tool.policy.domains, ttl_seconds=self.ttl_seconds,
            read_only=tool.policy.read_only, grantable=tool.policy.grantable,
            runtime=f"mcp:{self.config.name}",
        )  # fmt: skip
        return Wait(tool, proposal)

    def resume(self, name: str, arguments: Any, proposal_id: str, bound_args_hash: str) -> Step:
        """A call re-sent with the state of an earlier ``input_required`` answer.

        The state names the proposal the first round made or joined and its arguments hash, so
        the re-sent call is bound to that exact proposal (never a new one): open, it is waited
        on; approved, it is claimed and run once; consumed, its recorded result is returned;
        decided otherwise, the decision is the answer. A state naming another server's or
        another call's proposal is refused.
        """
        tool = self.tool(name)
        if tool is None:
            self.refresh()
            tool = self.tool(name)
        if tool is None:
            return Answer(GatewayResult.error(f"Unknown tool {name!r} on {self.config.name}."))
        try:
            tool.prepare(arguments if arguments is not None else {})
        except ToolCallError as error:
            return Answer(GatewayResult.error(f"[{error.code}] {error.message}"))
        try:
            proposal = self.ledger.get(proposal_id)
        except LedgerError:
            proposal = None
        if (
            proposal is None
            or proposal.owner != self.owner
            or proposal.tool_name != tool.name
            or proposal.args_hash != bound_args_hash
        ):
            return Answer(GatewayResult.error(
                f"The request state names a call that is not this one ({proposal_id}); nothing "
                "ran. Call the tool again without it.",
            ))  # fmt: skip
        with contextlib.suppress(LedgerError):
            self.ledger.recover()
        return Wait(tool, live_end(self.ledger, proposal_id), joined=True)  # an edit is followed

    def stopped_waiting(self, proposal_id: str) -> GatewayResult:
        """The client declined to keep waiting: nothing ran and the proposal is left as it is."""
        try:
            status = live_end(self.ledger, proposal_id).status.value
        except LedgerError:
            status = "unknown"
        return GatewayResult.error(
            f"You chose not to wait for approval of {proposal_id}; the call did not run. The "
            f"proposal stays in the ledger ({status}); calling the tool again with the same "
            "arguments joins it.",
            proposal_id,
        )

    def forward(self, step: Forward) -> GatewayResult:
        """Run an allowed read-only call upstream and return the upstream's answer."""
        result = step.tool.execute(step.prepared)
        return self._result_of(step.tool, step.prepared.arguments, result, None)

    def wait(self, proposal_id: str, timeout: float) -> Proposal:
        """Block up to ``timeout`` seconds for the call's proposal to leave ``pending``.

        Follows an edit to the edited proposal (the live end of the chain) and applies expiry.
        """
        return self.ledger.wait_decided(proposal_id, timeout)

    def finish(self, tool: McpTool, proposal: Proposal) -> GatewayResult:
        """Run a decided call: claim an approved proposal and call upstream once; otherwise
        answer with the decision (``isError``) or, for a consumed one, what is recorded."""
        proposal = live_end(self.ledger, proposal.proposal_id)
        if proposal.status is _S.PENDING:
            return GatewayResult.error(
                f"Still waiting for approval of {proposal.proposal_id}; the call did not run.",
                proposal.proposal_id,
            )
        if proposal.status is not _S.APPROVED:
            if proposal.status in _CONSUMED:
                return self._consumed_answer(proposal)
            return GatewayResult.error(decision_message(proposal), proposal.proposal_id)
        current = self.tool(tool.spec.name) or tool
        if current.schema_hash != proposal.tool_schema_hash:
            return GatewayResult.error(
                f"{tool.spec.name} changed its contract on {self.config.name} after "
                f"{proposal.proposal_id} was proposed; it did not run. Call it again.",
                proposal.proposal_id,
            )
        try:
            prepared = current.prepare(proposal.arguments)
        except ToolCallError as error:
            with contextlib.suppress(LedgerError):
                self.ledger.revoke(
                    proposal.proposal_id, self.owner,
                    f"the approved arguments do not fit the tool: {error.message}"[:500],
                    via="sdk",
                )  # fmt: skip
            return GatewayResult.error(f"[{error.code}] {error.message}", proposal.proposal_id)
        expected = self._args_hash(current, prepared.arguments)
        try:
            self.ledger.claim(proposal.proposal_id, expected, self.executor)
        except LedgerError as exc:
            latest = self.ledger.get(proposal.proposal_id)
            if latest.status in _CONSUMED:
                return self._consumed_answer(latest)
            if latest.status is not _S.APPROVED:
                return GatewayResult.error(decision_message(latest), latest.proposal_id)
            return GatewayResult.error(
                f"[{exc.code}] The approval of {proposal.proposal_id} could not be claimed; "
                "the call did not run.",
                proposal.proposal_id,
            )
        outcome = current.execute(prepared, approved=True)
        result = self._result_of(current, prepared.arguments, outcome, proposal.proposal_id)
        self._record(proposal.proposal_id, outcome, result)
        return result

    # -- internals -------------------------------------------------------------------------

    def _args_hash(self, tool: McpTool, arguments: dict[str, Any]) -> str:
        return args_hash(tool.name, tool.schema_hash, arguments, tool.execution_target or {})

    def _earlier(self, tool: McpTool, expected_args_hash: str) -> Proposal | None:
        """The newest proposal of this exact call that a repeat of it joins, if any."""
        page = self.ledger.list(
            owner=self.owner, tool_name=tool.name, newest_first=True, limit=200,
            status=[*_OPEN, *_CONSUMED],
        )  # fmt: skip
        now = self.ledger.clock.now()
        for proposal in page.items:
            if proposal.args_hash != expected_args_hash:
                continue
            if proposal.status in _OPEN:
                if proposal.expires_at > now:
                    return proposal
                continue
            if self.replay_window and now - proposal.updated_at <= self.replay_window:
                return proposal
        return None

    def _consumed_answer(self, proposal: Proposal) -> GatewayResult:
        """A consumed proposal is never run again: its recorded result, or why there is none."""
        pid = proposal.proposal_id
        if proposal.status is _S.EXECUTING:
            return GatewayResult.error(
                f"This exact call ({pid}) is running in another process; it is not run again.",
                pid,
            )
        if proposal.status is _S.NEEDS_RECONCILIATION:
            return GatewayResult.error(
                f"This exact call ({pid}) was approved and started, but the gateway running it "
                "stopped before recording a result. Whether it took effect is for a human to "
                "check (`supervisor proposals reconcile`); it is not run again.",
                pid,
            )
        stored = self._stored(pid)
        if stored is not None:
            return stored
        return GatewayResult.error(
            f"This exact call ({pid}) already ran ({proposal.status.value}); its result was "
            "not recorded. It is not run again.",
            pid,
        )

    def _stored(self, proposal_id: str) -> GatewayResult | None:
        content = self.ledger.stored_result(proposal_id)
        if content is None:
            return None
        try:
            return GatewayResult.from_json(json.loads(content), proposal_id)
        except ValueError:
            return None

    def _result_of(
        self,
        tool: McpTool,
        arguments: dict[str, Any],
        outcome: ToolCallResult,
        proposal_id: str | None,
    ) -> GatewayResult:
        """The upstream's own answer when it was called, else the gate's refusal as text."""
        raw = self.caller.take(self._args_hash(tool, arguments))
        if raw is not None:
            blocks = raw.blocks or tuple({"type": "text", "text": text} for text in raw.texts)
            return GatewayResult(blocks, raw.structured, raw.is_error, proposal_id)
        return GatewayResult(
            ({"type": "text", "text": json.dumps(outcome.value, sort_keys=True)},),
            None,
            not outcome.ok,
            proposal_id,
        )

    def _record(self, proposal_id: str, outcome: ToolCallResult, result: GatewayResult) -> None:
        stored = self.ledger.put_blob(
            json.dumps(result.to_json(), sort_keys=True).encode("utf-8"), "application/json"
        )
        ref = BlobRef(stored.sha256).result_ref
        evidence = outcome.evidence()
        if outcome.error is None:
            self.ledger.complete(proposal_id, evidence["status"], ref, executor=self.executor)
        else:
            self.ledger.fail(proposal_id, "error", outcome.error.code, result_ref=ref,
                             executor=self.executor)  # fmt: skip


def decision_message(proposal: Proposal) -> str:
    """Why a decided call did not run, for the client (``isError`` text)."""
    pid = proposal.proposal_id
    reason = (proposal.decision_reason or "").strip()[:_MAX_REASON_CHARS]
    because = f": {reason}" if reason else ""
    match proposal.status:
        case _S.REJECTED:
            who = proposal.decided_by or "a reviewer"
            return f"Rejected by {who}{because}. The call ({pid}) did not run."
        case _S.EXPIRED:
            return f"Nobody approved the call ({pid}) before it expired; it did not run."
        case _S.CANCELLED:
            return f"The call ({pid}) was cancelled{because}. It did not run."
        case _S.SUPERSEDED:
            return (
                f"The call ({pid}) was replaced by an edit that could not be read; it did not run."
            )
        case _:
            return f"The call ({pid}) is {proposal.status.value}; it did not run."


__all__ = [
    "DEFAULT_REPLAY_WINDOW_SECONDS",
    "Answer",
    "Forward",
    "GatewayResult",
    "McpGatewayCore",
    "RecordingCaller",
    "Step",
    "Wait",
    "decision_message",
    "gateway_owner",
]
