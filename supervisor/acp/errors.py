"""Typed errors of ``supervisor acp`` (stable codes; the CLI prints one line and exits 2)."""

from __future__ import annotations

from supervisor.errors import SupervisorError


class AgentNotStarted(SupervisorError, OSError):
    """The agent's command could not be started (not found, not executable)."""

    code = "acp_agent_not_started"


class AgentFailed(SupervisorError, RuntimeError):
    """The agent closed the connection or answered a request with an error."""

    code = "acp_agent_failed"
