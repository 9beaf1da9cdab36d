"""Governed dispatch: parse, validate, bind, call, and report a structured outcome.

Rules (in this order, each refusal without calling the function):

1. Arguments arrive as JSON text (what a model sends) or a mapping of JSON data. Empty text means
   ``{}``. Text that is not JSON is ``invalid_json``; JSON that is not an object is
   ``invalid_arguments``.
2. A reserved name (``approved``, ``confirm``, ``proposal_id``, ``_anything``...) is
   ``reserved_argument``; any other undeclared name ``unknown_argument``; a parameter without a
   default that is absent ``missing_argument``; a wrong type, enum value or range
   ``invalid_arguments``. Validation is strict (no ``"123"`` -> ``123``, no ``1`` -> ``true``),
   at every depth. For a parameter the strict OpenAI form made nullable, ``null`` means "use
   the default".
3. Defaults are applied and the validated values are bound to the Python signature by name.
4. An exception inside the tool is ``tool_exception``: the model gets the code and a safe message,
   the trace gets the redacted detail (the values of ``Secret``-marked arguments removed too).
   A result that is not JSON data is ``result_not_serializable``. A tool that requires approval
   refuses to run (``approval_required``) unless the caller states the approval was claimed.
"""

from __future__ import annotations

import asyncio
import json
import time
import traceback
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol

import pydantic_core
from pydantic import BaseModel, ValidationError

from supervisor.outcomes import ToolOutcome, resolve_outcome
from supervisor.outcomes.legacy import STRUCTURAL_KEYS
from supervisor.redact import redact
from supervisor.tools.contract import (
    Arguments,
    PreparedCall,
    Tool,
    ToolCallResult,
    approval_refusal,
    error_result,
)
from supervisor.tools.errors import ArgumentProblem, CallErrorCode, ToolCallError
from supervisor.tools.policy import is_reserved_name
from supervisor.tools.results import NotSerializable, to_json_value

if TYPE_CHECKING:
    from supervisor.tools.schema import CompiledSignature

# Beside the pipeline, the contract's names it produces (the runtime imports them from here).
__all__ = [
    "PLAIN_SUCCESS",
    "Arguments",
    "FunctionTool",
    "PreparedCall",
    "ToolCallResult",
    "aexecute",
    "dispatch",
    "error_result",
    "execute",
    "is_plain_json_record",
    "prepare",
    "secret_argument_values",
]

_PRIORITY: tuple[CallErrorCode, ...] = (
    "invalid_json",
    "reserved_argument",
    "unknown_argument",
    "missing_argument",
    "invalid_arguments",
)
#: The outcome of every plain success: outcomes are frozen, so one object serves them all.
PLAIN_SUCCESS = ToolOutcome()


class FunctionTool(Tool, Protocol):
    """A :class:`~supervisor.tools.contract.Tool` backed by a Python function: what this
    pipeline reads beyond the contract (``GovernedTool`` implements it)."""

    @property
    def function(self) -> Callable[..., Any]:
        """The Python function a call runs."""
        ...

    @property
    def signature(self) -> CompiledSignature:
        """The function's compiled argument model, parameter names and secret parameters."""
        ...

    @property
    def validate_json(self) -> Callable[[str | bytes], BaseModel]:
        """Strict validation of JSON text into the argument model."""
        ...

    @property
    def is_async(self) -> bool:
        """The function is a coroutine function."""
        ...

    @property
    def runs_inline(self) -> bool:
        """Dispatch may call it right away: synchronous and needing no approval."""
        ...


def dispatch(tool: FunctionTool, arguments: Arguments, *, approved: bool) -> ToolCallResult:
    """Validate and run a model's call; every refusal or failure becomes an error result.

    This is :func:`prepare` followed by :func:`execute`, fused because it is the hot path.
    """
    try:
        if (
            type(arguments) is str
            and arguments[:1] == "{"
            and not (tool.openai.null_means_default and "null" in arguments)
        ):
            validated = tool.validate_json(arguments)  # the common case: JSON text of an object
        else:
            validated = tool.validate_json(_raw_json(tool, arguments))
    except ValidationError as exc:
        return error_result(tool.name, _refusal(tool, exc))
    except ToolCallError as error:
        return error_result(tool.name, error)
    if not tool.runs_inline and (tool.is_async or not approved):
        prepared = PreparedCall(tool.name, validated, tool.signature.parameter_names)
        return execute(tool, prepared, approved=approved)
    started = perf_counter()
    try:
        returned = tool.function(**validated.__dict__)
    except Exception as exc:
        prepared = PreparedCall(tool.name, validated, tool.signature.parameter_names)
        return _exception_result(tool, prepared, exc)
    latency_ms = (perf_counter() - started) * 1000.0
    if type(returned) is dict and is_plain_json_record(returned):
        # The common case: a flat JSON object with none of the legacy outcome keys.
        return ToolCallResult(tool.name, returned, PLAIN_SUCCESS, None, None, latency_ms)
    return _finish(tool, returned, latency_ms)


def prepare(tool: FunctionTool, arguments: Arguments) -> PreparedCall:
    """Parse and validate ``arguments`` for ``tool``.

    Raises:
        ToolCallError: ``invalid_json``, ``invalid_arguments``, ``unknown_argument``,
            ``missing_argument`` or ``reserved_argument``, naming the argument and what was
            expected.
    """
    raw = _raw_json(tool, arguments)
    try:
        validated = tool.validate_json(raw)
    except ValidationError as exc:
        raise _refusal(tool, exc) from None
    return PreparedCall(tool.name, validated, tool.signature.parameter_names)


def execute(tool: FunctionTool, prepared: PreparedCall, *, approved: bool) -> ToolCallResult:
    """Call a synchronous tool with prepared arguments and report the outcome."""
    refused = approval_refusal(tool, prepared, approved)
    if refused is not None:
        return refused
    started = time.perf_counter()
    try:
        returned = tool.function(**prepared.kwargs())
        if tool.is_async:
            returned = _run_awaitable(returned)
    except Exception as exc:
        return _exception_result(tool, prepared, exc)
    return _finish(tool, returned, (time.perf_counter() - started) * 1000.0)


async def aexecute(tool: FunctionTool, prepared: PreparedCall, *, approved: bool) -> ToolCallResult:
    """Call a tool from async code: coroutines are awaited, sync tools run in a thread."""
    refused = approval_refusal(tool, prepared, approved)
    if refused is not None:
        return refused
    started = time.perf_counter()
    try:
        if tool.is_async:
            returned = await tool.function(**prepared.kwargs())
        else:
            returned = await asyncio.to_thread(tool.function, **prepared.kwargs())
    except Exception as exc:
        return _exception_result(tool, prepared, exc)
    return _finish(tool, returned, (time.perf_counter() - started) * 1000.0)


def is_plain_json_record(value: dict[Any, Any]) -> bool:
    """A flat JSON object (string keys; str, int, bool or None values) with none of the keys
    legacy outcome inference reads: already JSON data, and a plain success."""
    structural = STRUCTURAL_KEYS
    for key, item in value.items():
        if type(key) is not str or key in structural:
            return False
        kind = type(item)
        if not (kind is str or kind is int or kind is bool or item is None):
            return False
    return True


def _run_awaitable(awaitable: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(awaitable))
    awaitable.close()
    raise RuntimeError(
        "an async tool was dispatched synchronously inside an event loop; use adispatch"
    )


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _finish(tool: FunctionTool, returned: Any, latency_ms: float) -> ToolCallResult:
    value, outcome = resolve_outcome(returned)
    try:
        value = to_json_value(value)
    except NotSerializable as exc:
        error = ToolCallError(
            "result_not_serializable",
            f"{tool.name} returned a {exc.type_name} at {exc.path}, which is not JSON data.",
            tool.name,
            detail=f"{exc.path}: {exc.type_name}",
        )
        failed = error_result(tool.name, error)
        return ToolCallResult(tool.name, failed.value, failed.outcome, error, None, latency_ms)
    return ToolCallResult(tool.name, value, outcome, None, None, latency_ms)


def secret_argument_values(tool: FunctionTool, prepared: PreparedCall) -> list[str]:
    """The values of the call's arguments the tool marks ``Secret``, as text.

    A string is itself; any other value gives its JSON and ``str`` forms and every string
    value inside it (a credentials object's password can be printed alone). The redactor
    covers the usual encodings of each (:func:`supervisor.redact.encoded_forms`).
    """
    names = tool.signature.secret_parameters
    if not names:
        return []
    values: list[str] = []
    for name in names:
        value = prepared.validated.__dict__.get(name)
        if value is None:
            continue
        if isinstance(value, str):
            values.append(value)
            continue
        values.append(json.dumps(value, default=str))
        if not isinstance(value, bool):
            values.append(str(value))
            try:
                values.extend(_strings_in(to_json_value(value)))
            except NotSerializable:
                pass  # its JSON and str forms above still cover it
    return values


def _strings_in(value: Any) -> list[str]:
    """Every string value inside JSON data (object keys are names, not secrets)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings_in(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings_in(item)]
    return []


def _exception_result(tool: FunctionTool, prepared: PreparedCall, exc: Exception) -> ToolCallResult:
    frames = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=8))
    error = ToolCallError(
        "tool_exception",
        f"{tool.name} failed with {type(exc).__name__}; the details are in the supervisor trace.",
        tool.name,
        detail=redact(frames, known=secret_argument_values(tool, prepared)),
    )
    return error_result(tool.name, error)


def _raw_json(tool: FunctionTool, arguments: Arguments) -> bytes | str:
    if type(arguments) is str:
        raw: bytes | str = arguments
    elif arguments is None:
        return b"{}"
    elif isinstance(arguments, (bytes, bytearray)):
        raw = bytes(arguments)
    elif isinstance(arguments, str):
        raw = arguments
    else:
        try:
            raw = pydantic_core.to_json(arguments)
        except pydantic_core.PydanticSerializationError as exc:
            raise ToolCallError(
                "invalid_arguments",
                f"The arguments for {tool.name} are not JSON data ({exc}).",
                tool.name,
            ) from None
    if not raw or raw.isspace():
        return b"{}"
    nullable = tool.openai.null_means_default
    if nullable and ("null" in raw if isinstance(raw, str) else b"null" in raw):
        raw = _drop_default_nulls(raw, nullable)
    return raw


def _drop_default_nulls(raw: bytes | str, nullable: frozenset[str]) -> bytes | str:
    try:
        parsed = json.loads(raw)
    except ValueError:
        return raw  # validation reports invalid_json
    if not isinstance(parsed, dict):
        return raw
    kept = {key: value for key, value in parsed.items() if not (key in nullable and value is None)}
    return json.dumps(kept)


def _path(location: tuple[int | str, ...]) -> str | None:
    if not location:
        return None
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _refusal(tool: FunctionTool, exc: ValidationError) -> ToolCallError:
    declared = ", ".join(tool.signature.parameter_names) or "no arguments"
    problems: list[ArgumentProblem] = []
    for item in exc.errors(include_url=False):
        kind = item["type"]
        location = tuple(item["loc"])
        path = _path(location)
        if kind == "json_invalid":
            problems.append(
                ArgumentProblem(
                    "invalid_json",
                    None,
                    "a JSON object",
                    f"The arguments are not valid JSON: {item['msg']}.",
                )
            )
        elif kind in ("model_type", "model_attributes_type") and not location:
            problems.append(
                ArgumentProblem(
                    "invalid_arguments",
                    None,
                    "a JSON object",
                    "The arguments must be a JSON object.",
                )
            )
        elif kind in ("extra_forbidden", "unexpected_keyword_argument"):
            name = str(location[-1]) if location else ""
            if len(location) == 1 and is_reserved_name(name):
                problems.append(
                    ArgumentProblem(
                        "reserved_argument",
                        path,
                        "",
                        f"'{name}' is reserved: approval is decided by a human, never by an "
                        "argument.",
                    )
                )
            else:
                expected = f"one of: {declared}" if len(location) == 1 else "a declared field"
                problems.append(
                    ArgumentProblem(
                        "unknown_argument", path, expected, f"'{path}' is not an argument."
                    )
                )
        elif kind == "missing":
            problems.append(
                ArgumentProblem(
                    "missing_argument", path, "a value", f"'{path}' is required but missing."
                )
            )
        else:
            received = json.dumps(item.get("input"), ensure_ascii=False, default=str)[:80]
            problems.append(
                ArgumentProblem(
                    "invalid_arguments",
                    path,
                    item["msg"],
                    f"'{path}' is invalid: {item['msg']} (got {received}).",
                )
            )
    problems.sort(key=lambda problem: _PRIORITY.index(problem.code))
    first = problems[0]
    return ToolCallError(first.code, first.message, tool.name, tuple(problems))
