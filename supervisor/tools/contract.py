"""The tool contract: what every tool the runtime calls provides, and what one call produces.

:class:`Tool` is the contract as a ``Protocol``. A Python function under ``@governed_tool``
(:class:`~supervisor.tools.governed.GovernedTool`) and one tool of an MCP server
(:class:`~supervisor.mcp.tool.McpTool`) implement it; the registry, the toolbox and the runtime
type against it and never against either implementation. Beside it: the validated call
(:class:`PreparedCall`), the call's result (:class:`ToolCallResult`), the error result every
refusal becomes (:func:`error_result`) and the one approval refusal (:func:`approval_refusal`)
every implementation applies before anything runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel

from supervisor.outcomes import ToolOutcome, ToolOutcomeStatus
from supervisor.tools.errors import ToolCallError

if TYPE_CHECKING:
    from supervisor.tools.openai_schema import OpenAITool
    from supervisor.tools.policy import ToolPolicy

#: A model's arguments: JSON text (what a model sends), a mapping of JSON data, or nothing.
Arguments = str | bytes | bytearray | Mapping[str, Any] | None


@dataclass
class PreparedCall:
    """Arguments that passed validation, ready to bind (or to propose for approval)."""

    tool_name: str
    validated: BaseModel
    parameter_names: tuple[str, ...]

    @cached_property
    def arguments(self) -> dict[str, Any]:
        """The validated arguments, defaults applied, as JSON data (what an approval binds)."""
        dumped: dict[str, Any] = self.validated.model_dump(mode="json")
        return dumped

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the Python function."""
        # The argument model's fields are exactly the parameters, in signature order.
        return dict(self.validated.__dict__)


@dataclass(slots=True)
class ToolCallResult:
    """What one governed call produced (treat as read-only).

    Attributes:
        tool_name: The tool called.
        value: JSON data for the model: the unwrapped result, or ``{"error": {...}}``.
        outcome: Content-free evidence of how the call went (never sent to the model), as
            the tool reported it or legacy inference read it from the result.
        error: Why the call was refused or failed, if it was.
        arguments: Validated arguments (JSON data), when validation passed.
        latency_ms: How long the tool ran, in milliseconds, when it ran.
    """

    tool_name: str
    value: Any
    outcome: ToolOutcome
    error: ToolCallError | None = None
    arguments: dict[str, Any] | None = field(default=None, repr=False)
    latency_ms: float | None = None

    @property
    def ok(self) -> bool:
        """True when the tool ran and its outcome is usable."""
        return self.error is None and self.outcome.usable

    def evidence(self) -> dict[str, Any]:
        """The outcome's content-free evidence, with the latency this call measured.

        The outcome stays what the tool reported (a plain success is one shared, immutable
        ``ToolOutcome()``); the dispatcher's own measurement is ``latency_ms`` on the result
        and takes the place of any latency the tool reported.
        """
        evidence = self.outcome.evidence()
        if self.latency_ms is not None:
            evidence["latency_ms"] = self.latency_ms
        return evidence

    def timed_outcome(self) -> ToolOutcome:
        """The outcome with the measured latency in it (a new object when one was measured)."""
        if self.latency_ms is None:
            return self.outcome
        return self.outcome.with_latency(self.latency_ms)

    def model_content(self) -> str:
        """The value as the JSON text placed in the model's tool message."""
        return json.dumps(self.value, ensure_ascii=False)


@runtime_checkable
class Tool(Protocol):
    """A tool the runtime can offer a model, propose for approval and call.

    The identity of a call is ``(name, schema_hash, validated arguments, execution_target)``:
    it is what the args hash binds, so an approval never carries over to another contract or
    another target. Every member is read-only for the runtime.
    """

    @property
    def name(self) -> str:
        """The name the model sees (1-64 letters, digits, ``_`` or ``-``)."""
        ...

    @property
    def description(self) -> str:
        """The description the model sees."""
        ...

    @property
    def parameters(self) -> dict[str, Any]:
        """Strict JSON Schema of the arguments (the one validation enforces)."""
        ...

    @property
    def schema_hash(self) -> str:
        """SHA-256 of the tool's canonical contract."""
        ...

    @property
    def json_schema(self) -> dict[str, Any]:
        """The tool as ``{"name", "description", "parameters"}`` (what the registry records)."""
        ...

    @property
    def openai(self) -> OpenAITool:
        """The OpenAI function-tool form (strict when expressible)."""
        ...

    @property
    def policy(self) -> ToolPolicy:
        """Side effects, approval, domains and cache admission of every call."""
        ...

    @property
    def execution_target(self) -> dict[str, Any] | None:
        """Where a call runs beyond the host process (sandbox, MCP server...), if anywhere."""
        ...

    @property
    def import_ref(self) -> str | None:
        """``module:qualname`` another process can rebind the tool from, if there is one."""
        ...

    def prepare(self, arguments: Arguments) -> PreparedCall:
        """Validate a model's arguments without running anything.

        Raises:
            ToolCallError: the arguments are refused.
        """
        ...

    def execute(self, prepared: PreparedCall, *, approved: bool = False) -> ToolCallResult:
        """Run the tool with prepared arguments.

        Args:
            prepared: From :meth:`prepare`.
            approved: The caller claimed an approval for exactly these arguments. Without it a
                tool that requires approval returns an ``approval_required`` error unrun.
        """
        ...

    async def aexecute(self, prepared: PreparedCall, *, approved: bool = False) -> ToolCallResult:
        """Async :meth:`execute`."""
        ...

    def dispatch(self, arguments: Arguments, *, approved: bool = False) -> ToolCallResult:
        """Validate and run a model's call; every failure becomes a structured error result."""
        ...

    async def adispatch(self, arguments: Arguments, *, approved: bool = False) -> ToolCallResult:
        """Async :meth:`dispatch`."""
        ...


def error_result(
    tool_name: str, error: ToolCallError, arguments: dict[str, Any] | None = None
) -> ToolCallResult:
    """A result that reports ``error`` to the model and as an ``error`` outcome."""
    outcome = ToolOutcome(status=ToolOutcomeStatus.ERROR, reason_code=error.code)
    return ToolCallResult(tool_name, error.to_model(), outcome, error, arguments)


def approval_refusal(tool: Tool, prepared: PreparedCall, approved: bool) -> ToolCallResult | None:
    """The ``approval_required`` result for a call that needs an approval it was not given.

    Every tool applies it before anything runs, so a call needing approval never runs (nor
    reaches a server) without the caller stating the approval was claimed.

    Returns:
        None when the call may run: it was approved, or its policy needs no approval.
    """
    if approved or not tool.policy.requires_approval:
        return None
    error = ToolCallError(
        "approval_required",
        f"{tool.name} requires human approval before it runs ({tool.policy.approval_reason}).",
        tool.name,
    )
    return error_result(tool.name, error, prepared.arguments)
