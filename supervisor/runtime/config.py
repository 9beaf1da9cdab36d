"""Agent and model configuration: JSON only, and never a credential in the ledger."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from supervisor.runtime.endpoint import Endpoint, saved_base_url
from supervisor.runtime.errors import ModelConfigError
from supervisor.runtime.policies import ContextPolicy, ToolResultPolicy


class LLMConfig(BaseModel):
    """How to reach an OpenAI-compatible chat-completions endpoint.

    ``base_url`` and ``api_key`` fall back to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` when the
    client is created, so a saved agent picks up the credentials of the process that loads it.
    The API key is never saved in the ledger, traced or shown in a repr. Neither are the
    credentials a ``base_url`` may carry (userinfo, query parameters such as ``?api-key=``):
    the ledger saves the URL without them (:meth:`saved`), the HTTP client is given it without
    them (so its logs never show them) and they are added to each request below the client
    (:mod:`supervisor.runtime.endpoint`). A process that loads a saved agent takes them from
    ``OPENAI_BASE_URL`` when that names the same endpoint.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: Literal["openai"] = "openai"
    model: str = Field(min_length=1)
    base_url: str | None = Field(default=None, repr=False)
    api_key: SecretStr | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    timeout: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    stream: bool = False

    @field_validator("base_url")
    @classmethod
    def _parseable_base_url(cls, base_url: str | None) -> str | None:
        try:
            Endpoint.parse(base_url)
        except ValueError:
            # The message names no part of the URL: it may hold credentials.
            raise ValueError("not a usable URL (check the host and port)") from None
        return base_url

    @classmethod
    def from_mapping(cls, config: dict[str, Any]) -> LLMConfig:
        """Build from the seed's dict form (``{"provider": "openai", "model": ...}``).

        Raises:
            ModelConfigError: unknown keys, a provider other than ``openai``, no model.
        """
        try:
            return cls.model_validate(config)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'config'}: {error['msg']}"
                for error in exc.errors(include_url=False)
            )
            raise ModelConfigError(
                f"The LLM configuration is not usable ({problems}).",
                hint='Use {"provider": "openai", "model": "...", "base_url": optional, '
                '"api_key": optional, "temperature", "timeout", "max_retries"}; any '
                "OpenAI-compatible endpoint works through base_url or OPENAI_BASE_URL.",
            ) from None

    def resolved_base_url(self) -> str | None:
        """``base_url``, else ``OPENAI_BASE_URL``, else the client's default (with credentials)."""
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or None

    def endpoint(self) -> Endpoint:
        """The endpoint to call, its credentials split off.

        A configured ``base_url`` without credentials takes those of ``OPENAI_BASE_URL`` when
        both name the same endpoint (a saved agent loaded in a process that has them).
        """
        try:
            configured = Endpoint.parse(self.resolved_base_url())
        except ValueError:  # only OPENAI_BASE_URL can get here: base_url is validated
            raise ModelConfigError(
                "OPENAI_BASE_URL is not a usable URL.",
                hint="Check its host and port, or pass base_url in with_llm_config.",
            ) from None
        if self.base_url and not configured.has_credentials:
            try:
                environment = Endpoint.parse(os.environ.get("OPENAI_BASE_URL"))
            except ValueError:
                return configured
            if environment.url == configured.url:
                return environment
        return configured

    def secret_values(self) -> tuple[str, ...]:
        """Values this configuration knows to be secret (key, endpoint credentials)."""
        values = list(self.endpoint().secret_values())
        if self.api_key is not None:
            values.append(self.api_key.get_secret_value())
        else:
            values.append(os.environ.get("OPENAI_API_KEY") or "")
        return tuple(value for value in values if value)

    def resolved_api_key(self) -> str:
        """The API key, else ``OPENAI_API_KEY``.

        Raises:
            ModelConfigError: neither is set.
        """
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            raise ModelConfigError(
                "No API key for the model endpoint.",
                hint="Set OPENAI_API_KEY (any non-empty value for local servers such as "
                "Ollama, vLLM or LM Studio), or pass api_key in with_llm_config.",
            )
        return key

    def saved(self) -> dict[str, Any]:
        """The configuration as stored in the ledger: no API key, and a ``base_url`` without
        userinfo, query or fragment."""
        saved = self.model_dump(mode="json", exclude={"api_key"})
        saved["base_url"] = saved_base_url(self.base_url)
        return saved


class ToolReference(BaseModel):
    """How a saved agent finds one of its tools again: name, import reference, contract."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    import_ref: str | None
    schema_hash: str


class AgentConfig(BaseModel):
    """Everything ``MemAgent.load`` needs to re-create an agent in another process."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_id: str
    name: str
    instructions: str = ""
    llm: dict[str, Any]
    tools: tuple[ToolReference, ...] = ()
    context_policy: ContextPolicy = ContextPolicy()
    tool_result_policy: ToolResultPolicy | None = None
    toolbox_agent_id: str | None = None
    semantic_cache: bool = False
    cache_similarity: float = Field(default=0.95, gt=0, le=1)
    #: ``MODULE:FACTORY`` that builds this agent again (recorded by ``supervisor run``); a
    #: resume imports it only when it is on the operator's allowlist.
    restart_factory: str | None = None
    config_version: int = 1
