"""``governed_tool``: a Python function with a strict contract and an explicit policy."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar, overload

from pydantic import BaseModel

from supervisor.errors import ToolDefinitionError
from supervisor.tools import dispatch as _dispatch
from supervisor.tools.contract import Arguments, PreparedCall, ToolCallResult, error_result
from supervisor.tools.errors import ToolCallError
from supervisor.tools.openai_schema import OpenAITool, openai_tool
from supervisor.tools.policy import ToolPolicy
from supervisor.tools.schema import CompiledSignature, compile_signature, schema_hash

P = ParamSpec("P")
R = TypeVar("R")

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class GovernedTool(Generic[P, R]):
    """A function wrapped with its strict schema, policy and dispatch pipeline.

    It implements the :class:`~supervisor.tools.contract.Tool` contract (and the pipeline's
    :class:`~supervisor.tools.dispatch.FunctionTool`).

    Calling the object calls the function directly (host code stays ordinary Python); a model's
    call goes through :meth:`dispatch`, which validates before anything runs.

    Attributes:
        function: The wrapped callable.
        name: Tool name the model sees.
        description: Tool description the model sees.
        policy: The resolved policy.
        signature: Compiled validator and schema.
        parameters: Strict JSON Schema of the arguments.
        schema_hash: SHA-256 of the tool's canonical contract.
        openai: The OpenAI function-tool form (strict when expressible).
        import_ref: ``module:qualname`` when the function is importable, else None.
        execution_target: Where a call runs beyond the host process (sandbox backend and
            limits, MCP server...). It is part of every proposal and of the args hash, so an
            approval never carries over to another target.
    """

    def __init__(
        self,
        function: Callable[P, R],
        *,
        name: str | None,
        description: str | None,
        policy_options: dict[str, Any],
    ) -> None:
        if not callable(function):
            raise ToolDefinitionError(
                f"governed_tool needs a function, got {type(function).__name__}."
            )
        tool_name: str = name or str(getattr(function, "__name__", ""))
        if not _TOOL_NAME.match(tool_name):
            raise ToolDefinitionError(
                f"Tool name {tool_name!r} is not usable by a model.",
                hint="Use 1-64 letters, digits, '_' or '-'; pass name='...' to choose one.",
            )
        self.function = function
        self.name = tool_name
        self.policy = ToolPolicy.resolve(tool_name, **policy_options)
        self.signature: CompiledSignature = compile_signature(
            function, tool_name=tool_name, description=description
        )
        self.validate_json: Callable[[str | bytes], BaseModel] = (
            self.signature.args_model.__pydantic_validator__.validate_json
        )
        self.description = self.signature.description
        self.parameters = self.signature.parameters
        self.schema_hash = schema_hash(tool_name, self.description, self.parameters)
        self.openai: OpenAITool = openai_tool(tool_name, self.description, self.parameters)
        self.is_async = inspect.iscoroutinefunction(function)
        #: Dispatch may call it right away: synchronous and needing no approval.
        self.runs_inline = not self.is_async and not self.policy.requires_approval
        self.execution_target: dict[str, Any] | None = None
        qualname = getattr(function, "__qualname__", "")
        module = getattr(function, "__module__", None)
        importable = module and qualname and "<locals>" not in qualname and module != "__main__"
        self.import_ref: str | None = f"{module}:{qualname}" if importable else None
        functools.update_wrapper(self, function)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<governed_tool {self.name} {self.schema_hash[:12]}>"

    @property
    def json_schema(self) -> dict[str, Any]:
        """The tool as ``{"name", "description", "parameters"}`` (strict JSON Schema)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def prepare(self, arguments: Arguments) -> PreparedCall:
        """Validate a model's arguments without running anything.

        Raises:
            ToolCallError: the arguments are refused (see :mod:`supervisor.tools.dispatch`).
        """
        return _dispatch.prepare(self, arguments)

    def execute(self, prepared: PreparedCall, *, approved: bool = False) -> ToolCallResult:
        """Run the tool with prepared arguments.

        Args:
            prepared: From :meth:`prepare`.
            approved: The caller claimed an approval for exactly these arguments. Without it a
                tool that requires approval returns an ``approval_required`` error unrun.
        """
        return _dispatch.execute(self, prepared, approved=approved)

    async def aexecute(self, prepared: PreparedCall, *, approved: bool = False) -> ToolCallResult:
        """Async :meth:`execute`: coroutine tools are awaited, sync ones run in a thread."""
        return await _dispatch.aexecute(self, prepared, approved=approved)

    def dispatch(self, arguments: Arguments, *, approved: bool = False) -> ToolCallResult:
        """Validate and run a model's call; every failure becomes a structured error result."""
        return _dispatch.dispatch(self, arguments, approved=approved)

    async def adispatch(self, arguments: Arguments, *, approved: bool = False) -> ToolCallResult:
        """Async :meth:`dispatch`."""
        try:
            prepared = self.prepare(arguments)
        except ToolCallError as error:
            return error_result(self.name, error)
        return await self.aexecute(prepared, approved=approved)


@overload
def governed_tool(function: Callable[P, R], /) -> GovernedTool[P, R]: ...


@overload
def governed_tool(
    *,
    deterministic: bool = True,
    side_effects: bool = False,
    requires_approval: bool | None = None,
    approval_reason: str | None = None,
    domains: tuple[str, ...] | list[str] | str = (),
    name: str | None = None,
    description: str | None = None,
    cacheable: bool | None = None,
    allow_unapproved_side_effects: bool = False,
    grantable: bool = True,
) -> Callable[[Callable[P, R]], GovernedTool[P, R]]: ...


def governed_tool(
    function: Callable[P, R] | None = None,
    /,
    *,
    deterministic: bool = True,
    side_effects: bool = False,
    requires_approval: bool | None = None,
    approval_reason: str | None = None,
    domains: tuple[str, ...] | list[str] | str = (),
    name: str | None = None,
    description: str | None = None,
    cacheable: bool | None = None,
    allow_unapproved_side_effects: bool = False,
    grantable: bool = True,
) -> GovernedTool[P, R] | Callable[[Callable[P, R]], GovernedTool[P, R]]:
    """Govern a function as a tool: strict schema from its hints, validation before dispatch.

    Works bare (``@governed_tool``) and with arguments.

    Args:
        function: The function, when used bare.
        deterministic: Same arguments give the same result.
        side_effects: A call changes the world outside the agent.
        requires_approval: A human must approve each call; follows ``side_effects`` if None.
        approval_reason: Shown to the approver.
        domains: Scopes (routing, approver allowlists).
        name: Tool name for the model (default: the function's name).
        description: Tool description (default: the docstring's summary).
        cacheable: Admit results to the semantic cache (default: deterministic and no side
            effects; refused for side-effecting or non-deterministic tools).
        allow_unapproved_side_effects: State explicitly that a side effect may run unapproved.
        grantable: False marks a tool never-grantable (secret reads, egress): no grant
            ("approve and allow similar") may ever allow its calls; each is judged alone.

    Returns:
        A :class:`GovernedTool` (or a decorator producing one).

    Raises:
        ToolDefinitionError: the signature cannot be governed (missing hints, ``*args``,
            reserved parameter names).
        PolicyError: the policy flags contradict each other.
    """
    options: dict[str, Any] = {
        "deterministic": deterministic,
        "side_effects": side_effects,
        "requires_approval": requires_approval,
        "approval_reason": approval_reason,
        "domains": domains,
        "cacheable": cacheable,
        "allow_unapproved_side_effects": allow_unapproved_side_effects,
        "grantable": grantable,
    }

    def decorate(target: Callable[P, R]) -> GovernedTool[P, R]:
        return GovernedTool(target, name=name, description=description, policy_options=options)

    if function is not None:
        return decorate(function)
    return decorate
