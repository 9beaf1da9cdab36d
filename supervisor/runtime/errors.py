"""Errors of the agent runtime, each with a stable code and a message that says what to do."""

from __future__ import annotations

from supervisor.errors import SupervisorError


class ModelConfigError(SupervisorError, ValueError):
    """The LLM configuration cannot work (unknown provider, no model, no credentials)."""

    code = "model_config_invalid"


class ModelUnavailable(SupervisorError, ConnectionError):
    """The model endpoint failed after the configured retries."""

    code = "model_unavailable"


class ModelAuthFailed(ModelUnavailable):
    """The model endpoint refused the API key (HTTP 401 or 403); retrying cannot help."""

    code = "model_auth_failed"


class ModelNotServed(ModelUnavailable):
    """The model endpoint does not serve the configured model (HTTP 404)."""

    code = "model_not_served"


class AgentNotFound(SupervisorError, LookupError):
    """No saved agent has that id in this ledger."""

    code = "agent_not_found"


class CheckpointMissing(SupervisorError, LookupError):
    """A proposal's checkpoint (or the pending call in it) is not in the ledger."""

    code = "checkpoint_missing"


class CheckpointTooNew(SupervisorError, ValueError):
    """A checkpoint was written by a newer release of the runtime."""

    code = "checkpoint_schema_too_new"


class OffloadError(SupervisorError):
    """Base of the errors raised when reading an offloaded result."""

    code = "offload_error"


class InvalidDigest(OffloadError, ValueError):
    """A digest is not 64 hex characters (optionally prefixed with ``sha256:``)."""

    code = "invalid_digest"


class UnknownBlob(OffloadError, LookupError):
    """No stored result has that digest."""

    code = "unknown_blob"


class BlobIntegrityFailed(OffloadError):
    """The stored content no longer hashes to its digest, so it is not returned."""

    code = "blob_integrity_failed"


class BlobNotText(OffloadError, ValueError):
    """The blob is not UTF-8 text, so it is not an offloaded tool result."""

    code = "blob_not_text"
