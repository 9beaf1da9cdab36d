"""An MCP tool's input schema made strict, and validation of a model's arguments against it.

The schema the model is told and the one enforced are the same document: titles are dropped,
every object that declares ``properties`` without ``additionalProperties`` is closed, and a
missing top-level ``properties``/``required`` is filled in. Validation is ``jsonschema`` (no
coercion: ``"1"`` is not ``1`` and ``true`` is not ``1``); reserved approval names are refused
before the schema is consulted, and NaN/Infinity never parse.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; typed as Any at this edge
import jsonschema.validators  # type: ignore[import-untyped]
from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]

from supervisor.canonical import canonical_hash
from supervisor.errors import ReservedParameterError, ToolDefinitionError
from supervisor.tools.errors import ArgumentProblem, CallErrorCode, ToolCallError
from supervisor.tools.policy import is_reserved_name
from supervisor.tools.schema import iter_subschemas

_PRIORITY: tuple[CallErrorCode, ...] = (
    "invalid_json",
    "reserved_argument",
    "unknown_argument",
    "missing_argument",
    "invalid_arguments",
)


def mcp_schema_hash(server: str, tool: str, input_schema: Mapping[str, Any]) -> str:
    """The identity of an MCP tool's contract: SHA-256 of canonical {server, tool, schema}.

    Args:
        server: The server's configured name.
        tool: The tool's name on the server.
        input_schema: The tool's ``inputSchema`` exactly as listed.

    Returns:
        Lowercase hex SHA-256.
    """
    return canonical_hash({"server": server, "tool": tool, "input_schema": dict(input_schema)})


def strict_parameters(tool_name: str, input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema exposed to the model and enforced at dispatch.

    Raises:
        ToolDefinitionError: the root is not an object schema.
        ReservedParameterError: a top-level property uses a reserved approval name.
    """
    schema = copy.deepcopy(dict(input_schema))
    if schema.get("type", "object") != "object":
        raise ToolDefinitionError(
            f"MCP tool {tool_name!r} does not take a JSON object.", tool=tool_name
        )
    schema["type"] = "object"
    schema.pop("$schema", None)
    for sub in iter_subschemas(schema):
        sub.pop("title", None)
        if sub.get("type") == "object" and "properties" in sub:
            sub.setdefault("additionalProperties", False)
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    schema.setdefault("additionalProperties", False)
    reserved = sorted(name for name in schema["properties"] if is_reserved_name(name))
    if reserved:
        raise ReservedParameterError(
            f"MCP tool {tool_name!r} declares reserved parameter(s) {', '.join(reserved)}; "
            "approval is decided by a human, never by an argument, so the tool is not exposed.",
            tool=tool_name,
        )
    return schema


#: A ``jsonschema`` validator instance (the package ships no type stubs).
Validator = Any


def compile_validator(input_schema: Mapping[str, Any], parameters: dict[str, Any]) -> Validator:
    """A validator for ``parameters`` in the draft the server declared (2020-12 by default)."""
    cls = jsonschema.validators.validator_for(
        dict(input_schema), default=jsonschema.Draft202012Validator
    )
    cls.check_schema(parameters)
    return cls(parameters)


def _refuse_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON data")


def parse_arguments(tool_name: str, arguments: Any) -> dict[str, Any]:
    """Arguments as a dict of JSON data (``None`` or empty text is ``{}``).

    Raises:
        ToolCallError: ``invalid_json`` or ``invalid_arguments`` (not an object).
    """
    if arguments is None:
        return {}
    if isinstance(arguments, (bytes, bytearray)):
        arguments = bytes(arguments).decode("utf-8", errors="replace")
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            arguments = json.loads(arguments, parse_constant=_refuse_constant)
        except ValueError as exc:
            raise ToolCallError(
                "invalid_json", f"The arguments are not valid JSON: {exc}.", tool_name
            ) from None
    elif isinstance(arguments, Mapping):
        try:
            arguments = json.loads(json.dumps(dict(arguments), allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ToolCallError(
                "invalid_arguments",
                f"The arguments for {tool_name} are not JSON data ({exc}).",
                tool_name,
            ) from None
    if not isinstance(arguments, dict):
        raise ToolCallError("invalid_arguments", "The arguments must be a JSON object.", tool_name)
    return arguments


def validate_arguments(
    tool_name: str,
    validator: Validator,
    parameters: dict[str, Any],
    arguments: dict[str, Any],
    null_means_default: frozenset[str],
) -> dict[str, Any]:
    """Validate parsed arguments; ``null`` for an optional top-level parameter means "omit".

    Returns:
        The arguments exactly as they will be sent to the server.

    Raises:
        ToolCallError: the first problem by priority (reserved, unknown, missing, invalid).
    """
    checked = {
        key: value
        for key, value in arguments.items()
        if not (key in null_means_default and value is None)
    }
    problems: list[ArgumentProblem] = []
    declared = parameters.get("properties", {})
    for key in checked:
        if is_reserved_name(key):
            message = f"'{key}' is reserved: approval is decided by a human, never by an argument."
            problems.append(ArgumentProblem("reserved_argument", key, "", message))
    if not problems:
        for error in validator.iter_errors(checked):
            problems.append(_problem(error, declared))
    if not problems:
        return checked
    problems.sort(key=lambda problem: _PRIORITY.index(problem.code))
    first = problems[0]
    return _raise(ToolCallError(first.code, first.message, tool_name, tuple(problems)))


def _raise(error: ToolCallError) -> dict[str, Any]:
    raise error


def _path(error: ValidationError) -> str | None:
    text = ""
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or None


def _problem(error: ValidationError, declared: Mapping[str, Any]) -> ArgumentProblem:
    path = _path(error)
    if error.validator == "additionalProperties":
        instance = error.instance if isinstance(error.instance, dict) else {}
        allowed = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        extra = sorted(key for key in instance if key not in allowed)
        name = extra[0] if extra else ""
        where = f"{path}.{name}" if path else name
        expected = f"one of: {', '.join(declared) or 'no arguments'}" if not path else "a field"
        message = f"'{where}' is not an argument."
        return ArgumentProblem("unknown_argument", where, expected, message)
    if error.validator == "required":
        message = str(error.message)
        name = message.split("'")[1] if message.count("'") >= 2 else ""
        where = f"{path}.{name}" if path else name
        return ArgumentProblem(
            "missing_argument", where, "a value", f"'{where}' is required but missing."
        )
    received = json.dumps(error.instance, ensure_ascii=False, default=str)[:80]
    return ArgumentProblem(
        "invalid_arguments",
        path,
        str(error.validator),
        f"'{path or 'arguments'}' is invalid: {error.message[:200]} (got {received}).",
    )
