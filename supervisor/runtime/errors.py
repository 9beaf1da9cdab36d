"""Errors of the agent runtime, each with a stable code and a message that says what to do."""

from __future__ import annotations

from supervisor.errors import SupervisorError


class ModelConfigError(SupervisorError, ValueError):
    """The LLM configuration cannot work (unknown provider, no model, no credentials)."""

    code = "model_config_invalid"


class ModelUnavailable(SupervisorError, ConnectionError):
    """The model endpoint failed after the configured retries."""

    code = "model_unavailable"


class AgentNotFound(SupervisorError, LookupError):
    """No saved agent has that id in this ledger."""

    code = "agent_not_found"


class CheckpointMissing(SupervisorError, LookupError):
    """A proposal's checkpoint (or the pending call in it) is not in the ledger."""

    code = "checkpoint_missing"


class CheckpointTooNew(SupervisorError, ValueError):
    """A checkpoint was written by a newer release of the runtime."""

    code = "checkpoint_schema_too_new"
