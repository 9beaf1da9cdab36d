"""An MCP server's tool behind the tool contract: strict schema, mutation policy, idempotent calls.

A tool counts as mutating unless its server is trusted *and* the tool is annotated
``readOnlyHint``; mutating tools require approval. The tool's identity is server name + tool
name + schema hash; its execution target (server, tool, transport, endpoint fingerprint) is part
of every proposal and of the args hash, so an approval never carries over to another server or
another contract. A mutating call re-lists the server's tools first and refuses to run if the
contract changed since it was approved, and carries an idempotency key in the request ``_meta``.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict

from supervisor.canonical import args_hash
from supervisor.errors import ToolDefinitionError, model_error
from supervisor.mcp.config import McpServerConfig
from supervisor.mcp.schema import (
    compile_validator,
    mcp_schema_hash,
    parse_arguments,
    strict_parameters,
    validate_arguments,
)
from supervisor.outcomes import ToolOutcome, ToolOutcomeStatus, ToolResult, resolve_outcome
from supervisor.tools.contract import (
    Arguments,
    PreparedCall,
    ToolCallResult,
    approval_refusal,
    error_result,
)
from supervisor.tools.errors import ToolCallError
from supervisor.tools.openai_schema import OpenAITool, openai_tool
from supervisor.tools.policy import ToolPolicy

if TYPE_CHECKING:
    from supervisor.mcp.connection import McpCallResult, McpToolSpec
    from supervisor.mcp.gate import McpGate

IDEMPOTENCY_META_KEY = "supervisor/idempotency_key"
ARGS_HASH_META_KEY = "supervisor/args_hash"
PROPOSAL_META_KEY = "supervisor/proposal_id"
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MAX_ERROR_CHARS = 2_000


class McpCaller(Protocol):
    """What an MCP tool needs from its connection (see :class:`McpConnection`)."""

    def list_tools(self) -> list[McpToolSpec]:
        """Every tool the server lists now."""
        ...

    def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> McpCallResult:
        """One ``tools/call``."""
        ...


class _McpArguments(BaseModel):
    """Validated MCP arguments (validation is done by jsonschema; this only carries them)."""

    model_config = ConfigDict(extra="allow")


def governed_name(server: str, tool: str) -> str:
    """The name the model sees: ``<server>__<tool>``.

    Raises:
        ToolDefinitionError: the combined name is not usable by a model (1-64 of
            letters, digits, ``_`` or ``-``).
    """
    name = f"{server}__{tool}"
    if not _TOOL_NAME.match(name):
        raise ToolDefinitionError(
            f"MCP tool {tool!r} of server {server!r} gives the unusable name {name!r}.",
            hint="Tool names must be 1-64 letters, digits, '_' or '-' including the prefix.",
            tool=name,
        )
    return name


class McpTool:
    """One tool of one MCP server, implementing the :class:`~supervisor.tools.contract.Tool`
    contract.

    Validation is the server's JSON Schema made strict (:mod:`supervisor.mcp.schema`); a call
    that needs approval gets the contract's one approval refusal before the server is asked.
    Calling the object (``tool(**arguments)``) is a direct host-code call: validated, and still
    refused for a mutation.

    Args:
        caller: The live connection to the server.
        config: The server's configuration (name, transport, trust).
        spec: The tool as the server listed it.
        gate: Ledger side (idempotency keys, schema-change traces); optional.

    Raises:
        ToolDefinitionError: unusable name, non-object schema or reserved parameters.
    """

    #: An MCP tool is rebound by reconnecting to its server, never imported.
    import_ref: str | None = None

    def __init__(
        self,
        caller: McpCaller,
        config: McpServerConfig,
        spec: McpToolSpec,
        *,
        gate: McpGate | None = None,
    ) -> None:
        name = governed_name(config.name, spec.name)
        self.caller = caller
        self.server = config
        self.spec = spec
        self.gate = gate
        self.read_only = config.trust == "trusted" and spec.read_only
        self.name = name
        self.description = spec.description or f"{spec.name} on MCP server {config.name}"
        self.parameters = strict_parameters(name, spec.input_schema)
        self._parameter_names = tuple(self.parameters["properties"])
        self._validator = compile_validator(spec.input_schema, self.parameters)
        self.schema_hash = mcp_schema_hash(config.name, spec.name, spec.input_schema)
        self.openai: OpenAITool = openai_tool(name, self.description, self.parameters)
        reason = None
        if not self.read_only:
            why = "not annotated read-only" if config.trust == "trusted" else "untrusted server"
            reason = f"MCP tool {spec.name} on {config.name} may change external state ({why})"
        self.policy = ToolPolicy.resolve(
            name,
            deterministic=False,
            side_effects=not self.read_only,
            requires_approval=not self.read_only,
            approval_reason=reason,
            domains=("mcp",),
            cacheable=False,
            allow_unapproved_side_effects=False,
        )
        self.execution_target: dict[str, Any] | None = {
            "mcp_server": config.name,
            "tool": spec.name,
            "transport": config.transport,
            "endpoint_sha256": config.endpoint_fingerprint(),
        }

    def __call__(self, **arguments: Any) -> Any:
        """Direct host-code call: validated, still gated for mutations; returns the value."""
        return self.dispatch(arguments).value

    def __repr__(self) -> str:
        kind = "read-only" if self.read_only else "mutating"
        return f"<McpTool {self.name} {kind} {self.schema_hash[:12]}>"

    @property
    def json_schema(self) -> dict[str, Any]:
        """The tool as ``{"name", "description", "parameters"}`` (strict JSON Schema)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    # -- validation ------------------------------------------------------------------------

    def prepare(self, arguments: Arguments) -> PreparedCall:
        """Validate a model's arguments against the strict schema without calling the server.

        Raises:
            ToolCallError: refused arguments (see :mod:`supervisor.mcp.schema`).
        """
        parsed = parse_arguments(self.name, arguments)
        validated = validate_arguments(
            self.name, self._validator, self.parameters, parsed, self.openai.null_means_default
        )
        return PreparedCall(
            self.name, _McpArguments.model_validate(validated), self._parameter_names
        )

    # -- execution -------------------------------------------------------------------------

    def execute(self, prepared: PreparedCall, *, approved: bool = False) -> ToolCallResult:
        """Call the server with prepared arguments.

        Args:
            prepared: From :meth:`prepare`.
            approved: The caller claimed an approval for exactly these arguments; without it a
                mutating tool returns ``approval_required`` and the server is not called.
        """
        refused = approval_refusal(self, prepared, approved)
        if refused is not None:
            return refused
        started = time.perf_counter()
        returned = self._call(prepared.arguments)
        value, outcome = resolve_outcome(returned)
        latency_ms = (time.perf_counter() - started) * 1000.0
        return ToolCallResult(self.name, value, outcome, None, None, latency_ms)

    async def aexecute(self, prepared: PreparedCall, *, approved: bool = False) -> ToolCallResult:
        """Async :meth:`execute` (the blocking call runs in a worker thread)."""
        return await asyncio.to_thread(self.execute, prepared, approved=approved)

    def dispatch(self, arguments: Arguments, *, approved: bool = False) -> ToolCallResult:
        """Validate and call; every refusal or failure becomes a structured error result."""
        try:
            prepared = self.prepare(arguments)
        except ToolCallError as error:
            return error_result(self.name, error)
        return self.execute(prepared, approved=approved)

    async def adispatch(self, arguments: Arguments, *, approved: bool = False) -> ToolCallResult:
        """Async :meth:`dispatch`."""
        try:
            prepared = self.prepare(arguments)
        except ToolCallError as error:
            return error_result(self.name, error)
        return await self.aexecute(prepared, approved=approved)

    def _call(self, arguments: dict[str, Any]) -> ToolResult[Any]:
        from supervisor.mcp.connection import McpUnavailable

        ahash = args_hash(self.name, self.schema_hash, arguments, self.execution_target or {})
        meta: dict[str, Any] = {ARGS_HASH_META_KEY: ahash}
        try:
            if not self.read_only:
                changed = self._contract_changed()
                if changed is not None:
                    return changed
                proposal_id = self.gate.executing_proposal(self, ahash) if self.gate else None
                meta[IDEMPOTENCY_META_KEY] = proposal_id or ahash
                if proposal_id:
                    meta[PROPOSAL_META_KEY] = proposal_id
            result = self.caller.call_tool(self.spec.name, arguments, meta)
        except McpUnavailable as exc:
            code = str(exc.details.get("reason_code", exc.code))
            return _failure(code, exc.message, self.server.name)
        if result.is_error:
            message = " ".join(result.texts)[:_MAX_ERROR_CHARS] or "The MCP tool reported an error."
            return _failure("mcp_tool_error", message, self.server.name)
        return ToolResult(_value(result))

    def _contract_changed(self) -> ToolResult[Any] | None:
        """Re-list the server's tools; a changed contract refuses the call (nothing is sent)."""
        listed = self.caller.list_tools()
        current = next((spec for spec in listed if spec.name == self.spec.name), None)
        new_hash = (
            mcp_schema_hash(self.server.name, current.name, current.input_schema)
            if current is not None
            else None
        )
        if new_hash == self.schema_hash:
            return None
        if self.gate is not None:
            self.gate.record_schema_change(self, self.schema_hash, new_hash, [], phase="call")
        return ToolResult(
            model_error(
                "mcp_schema_changed",
                f"{self.name} changed its contract on the server since this call "
                "was approved; it was not sent. Re-propose the call.",
            ),
            ToolOutcome(status=ToolOutcomeStatus.ERROR, reason_code="mcp_schema_changed"),
        )


def _failure(code: str, message: str, server: str) -> ToolResult[Any]:
    return ToolResult(
        model_error(code, message),
        ToolOutcome(
            status=ToolOutcomeStatus.PROVIDER_ERROR, reason_code=code, provider=f"mcp:{server}"
        ),
    )


def _value(result: McpCallResult) -> Any:
    """What the model receives: structured content, else the text (JSON when it parses)."""
    import json

    if result.structured is not None:
        return result.structured
    values: list[Any] = []
    for text in result.texts:
        try:
            values.append(json.loads(text))
        except ValueError:
            values.append(text)
    values.extend({"type": kind, "omitted": True} for kind in result.other_blocks)
    if len(values) == 1:
        return values[0]
    return {"content": values}
