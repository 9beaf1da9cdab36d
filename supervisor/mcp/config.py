"""How to reach one MCP server and how far to trust it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from supervisor.canonical import canonical_hash

Trust = Literal["untrusted", "trusted"]

#: Server names become tool-name prefixes (``<server>__<tool>``), so they stay short and plain.
SERVER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$"


class McpServerConfig(BaseModel):
    """One MCP server: a stdio command or a streamable HTTP URL, plus a trust level.

    Attributes:
        name: Short name; the server's tools are exposed as ``<name>__<tool>``.
        command: Program and arguments to launch over stdio (exclusive with ``url``).
        url: Streamable HTTP endpoint (exclusive with ``command``).
        trust: ``"untrusted"`` (default): every tool counts as mutating and needs approval.
            ``"trusted"``: tools annotated ``readOnlyHint`` run without approval.
        env: Extra environment for a stdio server (never saved in the ledger).
        cwd: Working directory for a stdio server.
        timeout_seconds: Limit for one request to the server.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=SERVER_NAME_PATTERN)
    command: tuple[str, ...] | None = None
    url: str | None = None
    trust: Trust = "untrusted"
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: str | None = None
    timeout_seconds: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        """Exactly one of ``command`` and ``url``."""
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command=[...] (stdio) or url=... (HTTP)")
        if self.command is not None and not self.command:
            raise ValueError("command must name a program")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must be an http:// or https:// streamable HTTP endpoint")
        return self

    @property
    def transport(self) -> Literal["stdio", "streamable_http"]:
        """Which transport reaches the server."""
        return "stdio" if self.command is not None else "streamable_http"

    def endpoint_fingerprint(self) -> str:
        """SHA-256 of the command or URL: binds approvals to this exact server (no secrets)."""
        target: Any = list(self.command) if self.command is not None else self.url
        return canonical_hash({"transport": self.transport, "endpoint": target})

    def saved(self) -> dict[str, Any]:
        """The configuration as it may be recorded: no environment values."""
        return {
            "name": self.name,
            "transport": self.transport,
            "trust": self.trust,
            "env_keys": sorted(self.env),
            "endpoint_sha256": self.endpoint_fingerprint(),
        }
