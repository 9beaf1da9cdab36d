"""``supervisor mcp-server``: a read-only MCP view of the ledger for other agents and tools.

Tools (all annotated ``readOnlyHint``): list pending proposals, read content-free outcome
evidence, and the trace analyzer's statistics. There is deliberately no approve, reject or
cancel tool: approval belongs to a human in a trusted host (the TUI, the CLI or SDK host code),
never to a model talking MCP.

Proposal arguments (and execution targets) are shown as **keys and sizes** by default: every
object's keys, and for each leaf only its type and size (``"<string: 12 chars>"``). A client of
this server is another agent, so nothing it could not be trusted with is shown: pattern
redaction finds only the secrets it has a shape for, while a view without values has none to
leak. ``show_values=True`` (``supervisor mcp-server --show-values``) shows the values after
best-effort redaction (:func:`redact_value`).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from supervisor.analysis.analyzer import analyze, parse_since
from supervisor.ledger.models import Proposal, ProposalStatus, ProposalWaiter, TraceEvent
from supervisor.ledger.service import ApprovalLedger
from supervisor.outcomes import EVIDENCE_KEYS
from supervisor.redact import redact, redact_value
from supervisor.version import __version__

INSTRUCTIONS = (
    "Read-only view of the Agent Supervisor ledger: pending proposals (arguments as keys and "
    "sizes unless the operator chose redacted values), "
    "content-free outcome evidence and trace statistics. This server has no approve, reject "
    "or cancel tool on purpose: approval belongs to a human in a trusted host (the supervisor "
    "TUI, CLI or SDK), and nothing said over MCP can approve a call."
)
ARGUMENT_MODES = ("keys_and_sizes", "redacted_values")
_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
_EVIDENCE_KINDS = ("tool_result", "approval", "tool_schema_changed", "mcp_elicitation")


def shape_value(value: Any) -> Any:
    """``value`` reduced to keys and sizes: objects keep their (redacted) keys, every other
    value becomes a description of its type and size, such as ``"<string: 12 chars>"``."""
    if isinstance(value, dict):
        return {redact(str(key)): shape_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return f"<array: {len(value)} items>"
    if isinstance(value, str):
        return f"<string: {len(value)} chars>"
    if isinstance(value, bool):
        return "<boolean>"
    if isinstance(value, int):
        return "<integer>"
    if isinstance(value, float):
        return "<number>"
    return "<null>" if value is None else f"<{type(value).__name__}>"


def proposal_view(
    proposal: Proposal, *, show_values: bool = False, waiter: ProposalWaiter | None = None
) -> dict[str, Any]:
    """What the MCP server shows of a proposal: no approver context, and arguments as keys
    and sizes (or, with ``show_values``, values after best-effort redaction). ``orphaned``
    says the process waiting on it is gone; ``waiter`` names that process (no pid or host)."""
    view = redact_value if show_values else shape_value
    summary = waiter.summary() if waiter is not None else None
    return {
        "proposal_id": proposal.proposal_id,
        "tool_name": proposal.tool_name,
        "tool_schema_hash": proposal.tool_schema_hash,
        "arguments_mode": ARGUMENT_MODES[1] if show_values else ARGUMENT_MODES[0],
        "arguments": view(proposal.arguments),
        "args_hash": proposal.args_hash,
        "execution_target": view(proposal.execution_target),
        "policy_reason": proposal.policy_reason,
        "owner": proposal.owner,
        "user": proposal.user,
        "thread_id": proposal.thread_id,
        "domains": list(proposal.domains),
        "status": proposal.status.value,
        "created_at": proposal.created_at.isoformat(),
        "expires_at": proposal.expires_at.isoformat(),
        "orphaned": waiter is not None and waiter.orphans(proposal),
        "waiter": None
        if summary is None
        else {key: summary[key] for key in ("process_id", "alive", "process_status", "gone_since")},
    }


def evidence_view(event: TraceEvent) -> dict[str, Any]:
    """A trace event reduced to content-free evidence (no payload text, no arguments)."""
    outcome = event.payload.get("outcome")
    view: dict[str, Any] = {
        "event_id": event.event_id,
        "at": event.at.isoformat(),
        "agent_id": event.agent_id,
        "thread_id": event.thread_id,
        "run_id": event.run_id,
        "kind": event.kind,
        "tool": event.tool,
        "outcome_status": event.outcome_status,
        "reason_code": event.reason_code,
        "call_id": event.payload.get("call_id"),
        "proposal_id": event.payload.get("proposal_id"),
    }
    if isinstance(outcome, dict):
        view["outcome"] = {key: outcome.get(key) for key in EVIDENCE_KEYS if key in outcome}
    return view


def _latest(
    ledger: ApprovalLedger, kind: str, agent_id: str | None, run_id: str | None, limit: int
) -> list[TraceEvent]:
    kept: deque[TraceEvent] = deque(maxlen=limit)
    after = 0
    while True:
        batch = ledger.trace_events(
            agent_id=agent_id, run_id=run_id, kind=kind, after_id=after, limit=1000
        )
        kept.extend(batch)
        if len(batch) < 1000:
            return list(kept)
        after = batch[-1].event_id or after


def build_server(ledger: ApprovalLedger, *, show_values: bool = False) -> MCPServer:
    """The read-only MCP server over ``ledger`` (no approval tool, on purpose).

    Args:
        ledger: The ledger to show.
        show_values: Show argument values after best-effort redaction instead of keys and
            sizes only (see the module docstring).
    """
    server: MCPServer = MCPServer(
        "agent-supervisor", instructions=INSTRUCTIONS, version=__version__
    )

    @server.tool(annotations=_READ_ONLY)
    def list_pending_proposals(
        agent_id: str | None = None, tool_name: str | None = None, limit: int = 50
    ) -> dict[str, Any]:
        """List pending proposals awaiting a human decision, oldest first. Arguments are shown
        as keys and sizes (``arguments_mode``). Read-only: deciding happens in a trusted host,
        not over MCP."""
        page = ledger.list(
            status=ProposalStatus.PENDING, owner=agent_id, tool_name=tool_name,
            limit=max(1, min(limit, 500)),
        )  # fmt: skip
        waiters = ledger.waiters(proposal.proposal_id for proposal in page.items)
        items = [
            proposal_view(p, show_values=show_values, waiter=waiters.get(p.proposal_id))
            for p in page.items
        ]
        return {"proposals": items, "count": len(items), "more": page.next_cursor is not None}

    @server.tool(annotations=_READ_ONLY)
    def read_outcome_evidence(
        run_id: str | None = None,
        agent_id: str | None = None,
        tool: str | None = None,
        limit: int = 100,
    ) -> dict[str, Any]:
        """Content-free outcome evidence (status, reason code, counts, timings; never arguments
        or results) for a run, an agent or a tool: the most recent events, oldest first."""
        size = max(1, min(limit, 1000))
        events: list[TraceEvent] = []
        for kind in _EVIDENCE_KINDS:
            events.extend(_latest(ledger, kind, agent_id, run_id, size if tool is None else 10**6))
        if tool is not None:
            events = [event for event in events if event.tool == tool]
        events.sort(key=lambda event: event.event_id or 0)
        chosen = events[-size:]
        return {"events": [evidence_view(event) for event in chosen], "count": len(chosen)}

    @server.tool(annotations=_READ_ONLY)
    def trace_statistics(since: str | None = None) -> dict[str, Any]:
        """The trace analyzer's figures: per-tool outcome counts and usable rate, fallback and
        degraded rates, provider error codes, approval latency p50/p95, expired and rejected
        counts, top reason codes. ``since``: ISO-8601 time or relative (30m, 2h, 7d)."""
        start = parse_since(since) if since else None
        return analyze(ledger, since=start).to_json()

    return server
