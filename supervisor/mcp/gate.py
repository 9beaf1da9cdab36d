"""The ledger side of MCP tools: recorded contracts, stale grants, traces, idempotency keys.

A changed contract (re-listing gives another schema hash than the one recorded in the ledger's
tool registry, or a standing grant names another hash or server endpoint) invalidates standing
grants: pending proposals are cancelled and approved ones revoked, each with a reason, and a
``tool_schema_changed`` trace event records it. Declined elicitations are traced as information.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import Proposal, ProposalStatus, ToolRecord, TraceEvent
from supervisor.ledger.service import ApprovalLedger
from supervisor.tools.contract import Tool

if TYPE_CHECKING:
    from supervisor.mcp.config import McpServerConfig
    from supervisor.mcp.connection import ElicitationNotice, McpToolSpec

GATE_ACTOR = "supervisor:mcp-gate"
HANDLE_PREFIX = "mcp:"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchemaChange:
    """One tool whose contract changed, and the grants that change invalidated."""

    tool: str
    old_schema_hash: str | None
    new_schema_hash: str | None
    invalidated: tuple[str, ...]


class GatedTool(Tool, Protocol):
    """What the gate reads of an MCP tool (:class:`~supervisor.mcp.tool.McpTool`): the tool
    contract, the server it runs on and the tool as that server listed it."""

    @property
    def server(self) -> McpServerConfig:
        """The server's configuration."""
        ...

    @property
    def spec(self) -> McpToolSpec:
        """The tool as the server listed it."""
        ...


def tool_handle(agent_id: str, tool_name: str) -> str:
    """Stable registry handle of an agent's MCP tool (one row per tool name)."""
    return f"{HANDLE_PREFIX}{agent_id}:{tool_name}"


class McpGate:
    """Ledger bookkeeping for one agent's MCP tools.

    Args:
        ledger: The approval ledger.
        agent_id: The agent whose proposals and registry rows are concerned.
    """

    def __init__(self, ledger: ApprovalLedger, agent_id: str) -> None:
        self.ledger = ledger
        self.agent_id = agent_id

    def sync(self, tools: Iterable[GatedTool]) -> list[SchemaChange]:
        """Record the listed contracts and invalidate grants made under other ones.

        Returns:
            The tools whose contract changed (or that had stale grants).
        """
        changes: list[SchemaChange] = []
        for tool in tools:
            handle = tool_handle(self.agent_id, tool.name)
            recorded = self.ledger.get_tool(handle)
            old_hash = recorded.schema_hash if recorded is not None else None
            invalidated = self.invalidate_stale(tool)
            if (old_hash is not None and old_hash != tool.schema_hash) or invalidated:
                changes.append(
                    self.record_schema_change(
                        tool, old_hash, tool.schema_hash, invalidated, phase="list"
                    )
                )
            if recorded is None or recorded.schema_hash != tool.schema_hash:
                self.ledger.upsert_tool(_record(self.agent_id, handle, tool))
        return changes

    def invalidate_stale(self, tool: GatedTool) -> list[str]:
        """Cancel pending and revoke approved proposals of ``tool`` made for another contract
        or another server endpoint, and revoke its grants made for one. Returns their ids
        (a grant's as ``grant:<id>``)."""
        invalidated: list[str] = []
        target = tool.execution_target or {}
        for proposal in self._open_proposals(tool.name):
            same_target = proposal.execution_target == target
            if proposal.tool_schema_hash == tool.schema_hash and same_target:
                continue
            reason = (
                f"MCP tool {tool.name} changed its contract "
                f"({proposal.tool_schema_hash[:12]} -> {tool.schema_hash[:12]}); the approval "
                "no longer applies. Re-propose the call."
            )
            try:
                if proposal.status is ProposalStatus.PENDING:
                    self.ledger.cancel(proposal.proposal_id, GATE_ACTOR, reason, via="sdk")
                else:
                    self.ledger.revoke(proposal.proposal_id, GATE_ACTOR, reason, via="sdk")
            except LedgerError as exc:  # decided or claimed meanwhile: nothing to withdraw
                _log.info("could not invalidate %s: %s", proposal.proposal_id, exc)
                continue
            invalidated.append(proposal.proposal_id)
        stale = self.ledger.revoke_stale_grants(
            tool.name, tool.schema_hash, target, GATE_ACTOR,
            f"MCP tool {tool.name} changed its contract; the grant no longer applies",
        )  # fmt: skip
        invalidated.extend(f"grant:{grant.grant_id}" for grant in stale)
        return invalidated

    def record_schema_change(
        self,
        tool: GatedTool,
        old_hash: str | None,
        new_hash: str | None,
        invalidated: list[str],
        *,
        phase: str,
    ) -> SchemaChange:
        """Trace a contract change (``phase``: ``list`` at connect time, ``call`` before a call)."""
        self.ledger.append_trace(
            [
                TraceEvent(
                    at=self.ledger.clock.now(),
                    agent_id=self.agent_id,
                    kind="tool_schema_changed",
                    tool=tool.name,
                    outcome_status="invalidated" if invalidated else "changed",
                    reason_code="mcp_schema_changed",
                    payload={
                        "mcp_server": tool.server.name,
                        "mcp_tool": tool.spec.name,
                        "old_schema_hash": old_hash,
                        "new_schema_hash": new_hash,
                        "invalidated_proposals": invalidated,
                        "phase": phase,
                    },
                )
            ]
        )
        return SchemaChange(tool.name, old_hash, new_hash, tuple(invalidated))

    def record_elicitation(self, notice: ElicitationNotice) -> None:
        """Trace a declined elicitation (information only; it never approves anything)."""
        tool = f"{notice.server}__{notice.tool}" if notice.tool else None
        self.ledger.append_trace(
            [
                TraceEvent(
                    at=self.ledger.clock.now(),
                    agent_id=self.agent_id,
                    kind="mcp_elicitation",
                    tool=tool,
                    outcome_status="declined",
                    reason_code="elicitation_is_not_approval",
                    payload={
                        "mcp_server": notice.server,
                        "mode": notice.mode,
                        "requested_fields": list(notice.requested_fields),
                        "message_chars": len(notice.message),
                    },
                )
            ]
        )

    def executing_proposal(self, tool: GatedTool, expected_args_hash: str) -> str | None:
        """The proposal this process just claimed for exactly this call, if any.

        Its id becomes the idempotency key: one approved action, one key, however often the
        request is delivered.
        """
        try:
            page = self.ledger.list(
                status=ProposalStatus.EXECUTING, owner=self.agent_id, tool_name=tool.name,
                newest_first=True, limit=50,
            )  # fmt: skip
        except LedgerError:
            return None
        host, pid = socket.gethostname(), os.getpid()
        for proposal in page.items:
            if proposal.args_hash != expected_args_hash:
                continue
            execution = self.ledger.execution(proposal.proposal_id)
            if execution is not None and (execution.executor.pid, execution.executor.host) == (
                pid,
                host,
            ):
                return proposal.proposal_id
        return None

    def _open_proposals(self, tool_name: str) -> list[Proposal]:
        found: list[Proposal] = []
        cursor: str | None = None
        while True:
            page = self.ledger.list(
                status=[ProposalStatus.PENDING, ProposalStatus.APPROVED], owner=self.agent_id,
                tool_name=tool_name, limit=500, cursor=cursor,
            )  # fmt: skip
            found.extend(page.items)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor


def _record(agent_id: str, handle: str, tool: GatedTool) -> ToolRecord:
    return ToolRecord(
        handle=handle,
        agent_id=agent_id,
        name=tool.name,
        import_ref=None,
        description=tool.description,
        json_schema=tool.json_schema,
        schema_hash=tool.schema_hash,
        domains=tool.policy.domains,
        flags={
            "mcp": True,
            "mcp_server": tool.server.name,
            "mcp_tool": tool.spec.name,
            "trust": tool.server.trust,
            "read_only_hint": tool.spec.read_only,
            "requires_approval": tool.policy.requires_approval,
            "side_effects": tool.policy.side_effects,
            "endpoint_sha256": tool.server.endpoint_fingerprint(),
        },
    )
