"""Connect to MCP servers and expose their tools as governed tools."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from supervisor.errors import SupervisorError
from supervisor.ledger.service import ApprovalLedger
from supervisor.mcp.config import McpServerConfig, Trust
from supervisor.mcp.connection import McpConnection
from supervisor.mcp.gate import McpGate
from supervisor.mcp.tool import McpTool

_log = logging.getLogger(__name__)


def mcp_server(
    name: str,
    *,
    command: Sequence[str] | None = None,
    url: str | None = None,
    trust: Trust = "untrusted",
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout_seconds: float = 30.0,
) -> McpServerConfig:
    """A server configuration (the same arguments as ``MemAgentBuilder.with_mcp_server``).

    Raises:
        pydantic.ValidationError: bad name, both or neither of ``command`` and ``url``.
    """
    return McpServerConfig(
        name=name,
        command=tuple(command) if command is not None else None,
        url=url,
        trust=trust,
        env=dict(env or {}),
        cwd=cwd,
        timeout_seconds=timeout_seconds,
    )


def mcp_tools(
    servers: Iterable[McpServerConfig],
    *,
    ledger: ApprovalLedger | None = None,
    agent_id: str | None = None,
) -> list[McpTool]:
    """Connect to each server, list its tools and wrap each as a governed tool.

    With ``ledger`` and ``agent_id`` the tools are bound to the durable gate: their contracts
    are recorded in the ledger's tool registry, grants made under another contract are
    invalidated (and traced), mutating calls carry the claimed proposal's id as idempotency
    key, and declined elicitations are traced. Pass the result to ``MemAgent.load(...,
    tools=...)`` to resume MCP proposals in a new process.

    Tools that cannot be governed (unusable name, reserved parameter names, a non-object
    schema) are skipped with a warning.

    Raises:
        McpUnavailable: a server could not be reached.
    """
    gate = McpGate(ledger, agent_id) if ledger is not None and agent_id is not None else None
    tools: list[McpTool] = []
    for config in servers:
        connection = McpConnection(
            config, on_elicitation=gate.record_elicitation if gate is not None else None
        ).open()
        for spec in connection.list_tools():
            try:
                tools.append(McpTool(connection, config, spec, gate=gate))
            except SupervisorError as exc:
                _log.warning("MCP tool %s of %s not exposed: %s", spec.name, config.name, exc)
    if gate is not None:
        gate.sync(tools)
    return tools


def close_mcp_tools(tools: Iterable[Any]) -> None:
    """Close the connections behind ``tools`` (stops their stdio servers)."""
    seen: set[int] = set()
    for tool in tools:
        caller = getattr(tool, "caller", None)
        if isinstance(caller, McpConnection) and id(caller) not in seen:
            seen.add(id(caller))
            caller.close()
