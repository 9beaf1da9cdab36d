"""Strict JSON Schema and a validator, compiled once from a tool's signature.

The schema and the validator come from the same pydantic model, so what the model is told and
what dispatch accepts cannot drift apart. Rules:

* every parameter needs a type hint; ``*args``, ``**kwargs`` and positional-only parameters are
  refused (a tool that accepts anything cannot be governed);
* parameters without defaults are ``required``; defaults are emitted; objects at every depth carry
  ``additionalProperties: false``;
* ``Literal`` becomes ``enum`` (or ``const``), ``Optional``/unions ``anyOf``, lists ``array``,
  ``dict[str, X]`` an object with typed values, nested pydantic models, TypedDicts and dataclasses
  a ``$ref`` into ``$defs``;
* descriptions come from ``Annotated[..., Field(description=...)]`` first, then from the
  docstring's Google-style ``Args:`` section;
* validation is strict: no str->int, str->bool or int->str coercion, NaN and Infinity refused;
* ``Annotated[str, Secret]`` marks a parameter secret: its value is redacted from anything the
  call writes to traces (exception text included). The schema the model sees is unchanged.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, create_model
from pydantic.fields import FieldInfo

from supervisor.canonical import canonical_hash
from supervisor.errors import ReservedParameterError, ToolDefinitionError
from supervisor.tools.docstrings import parse_docstring
from supervisor.tools.hardening import harden_annotation
from supervisor.tools.policy import RESERVED_PARAMETER_NAMES, is_reserved_name

_ARGS_CONFIG = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class Secret:
    """Marks a tool parameter whose value must never reach a trace or a log.

    ``def login(user: str, password: Annotated[str, Secret]) -> dict: ...`` — the value the
    model sent for ``password`` is replaced with ``[REDACTED]`` in the call's trace detail
    (an exception's text and frames included). ``Secret`` and ``Secret()`` both work. Only
    top-level parameters are marked; the value is still validated, proposed and run as usual.
    """


@dataclass(frozen=True)
class CompiledSignature:
    """The validator and schema derived from one function's signature.

    Attributes:
        args_model: Strict pydantic model of the arguments (compiled once).
        parameters: JSON Schema of the arguments object.
        parameter_names: Declared parameters in signature order.
        description: Tool description for the model.
        secret_parameters: Parameters marked ``Annotated[..., Secret]``.
    """

    args_model: type[BaseModel]
    parameters: dict[str, Any]
    parameter_names: tuple[str, ...]
    description: str
    secret_parameters: frozenset[str] = frozenset()


def compile_signature(
    function: Callable[..., Any], *, tool_name: str, description: str | None
) -> CompiledSignature:
    """Compile ``function``'s signature into a strict validator and JSON Schema.

    Raises:
        ToolDefinitionError: a parameter has no type hint, is variadic or positional-only, or a
            hint cannot be turned into a schema.
        ReservedParameterError: a parameter uses a reserved approval name or starts with ``_``.
    """
    signature = inspect.signature(function)
    try:
        hints = _parameter_hints(function)
    except (NameError, TypeError) as exc:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: its type hints cannot be resolved ({exc}).",
            hint="Import every type used in the signature at module level.",
            tool=tool_name,
        ) from exc
    docs = parse_docstring(function.__doc__)
    fields: dict[str, Any] = {}
    secret: set[str] = set()
    for name, parameter in signature.parameters.items():
        _check_parameter(tool_name, name, parameter)
        if name not in hints:
            raise ToolDefinitionError(
                f"Tool {tool_name!r}: parameter {name!r} has no type hint.",
                hint="Annotate every parameter; the hint becomes the schema the model must follow.",
                tool=tool_name,
                argument=name,
            )
        if _is_secret(hints[name]):
            secret.add(name)
        annotation = harden_annotation(_without_secret(hints[name]))
        has_own_description = _annotated_description(annotation) is not None
        field_kwargs: dict[str, Any] = {}
        if not has_own_description and name in docs.arguments:
            field_kwargs["description"] = docs.arguments[name]
        if parameter.default is inspect.Parameter.empty:
            fields[name] = (annotation, Field(**field_kwargs))
        else:
            fields[name] = (annotation, Field(default=parameter.default, **field_kwargs))
    model_name = "".join(part.capitalize() for part in tool_name.split("_")) + "Arguments"
    try:
        args_model = create_model(model_name, __config__=_ARGS_CONFIG, **fields)
        raw_schema = args_model.model_json_schema()
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: its signature cannot be turned into a JSON Schema ({exc}).",
            hint="Use JSON-shaped types: str, int, float, bool, Literal, list, dict[str, X], "
            "pydantic models, typing_extensions.TypedDict or dataclasses.",
            tool=tool_name,
        ) from exc
    parameters = _clean_schema(raw_schema)
    return CompiledSignature(
        args_model=args_model,
        parameters=parameters,
        parameter_names=tuple(signature.parameters),
        description=(description if description is not None else docs.summary).strip(),
        secret_parameters=frozenset(secret),
    )


def _is_secret_marker(meta: Any) -> bool:
    return meta is Secret or isinstance(meta, Secret)


def _is_secret(annotation: Any) -> bool:
    return get_origin(annotation) is Annotated and any(
        _is_secret_marker(meta) for meta in get_args(annotation)[1:]
    )


def _without_secret(annotation: Any) -> Any:
    """``annotation`` without the :class:`Secret` marker (pydantic needs no part of it)."""
    if not _is_secret(annotation):
        return annotation
    inner, *metadata = get_args(annotation)
    kept = [meta for meta in metadata if not _is_secret_marker(meta)]
    return Annotated[(inner, *kept)] if kept else inner


def _parameter_hints(function: Callable[..., Any]) -> dict[str, Any]:
    """Resolved hints of the parameters only: the return annotation plays no part in the
    contract, so a return type that cannot be resolved here is no reason to refuse the tool."""
    annotations = dict(getattr(function, "__annotations__", {}))
    annotations.pop("return", None)
    target = getattr(function, "__wrapped__", function)
    global_names = dict(getattr(target, "__globals__", {}))
    try:
        local_names = dict(inspect.getclosurevars(target).nonlocals)
    except (TypeError, ValueError):
        local_names = {}

    def parameters_only() -> None: ...

    parameters_only.__annotations__ = annotations
    return typing.get_type_hints(
        parameters_only, globalns=global_names, localns=local_names, include_extras=True
    )


def schema_hash(name: str, description: str, parameters: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a tool's contract (name, description, parameters)."""
    return canonical_hash({"name": name, "description": description, "parameters": parameters})


def _check_parameter(tool_name: str, name: str, parameter: inspect.Parameter) -> None:
    if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        raise ToolDefinitionError(
            f"Tool {tool_name!r} accepts *{name} or **{name}; a tool that accepts anything "
            "cannot be governed.",
            hint="Declare each argument explicitly with a type hint.",
            tool=tool_name,
            argument=name,
        )
    if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
        raise ToolDefinitionError(
            f"Tool {tool_name!r}: parameter {name!r} is positional-only.",
            hint="Remove the '/' marker; tool arguments are bound by name.",
            tool=tool_name,
            argument=name,
        )
    if is_reserved_name(name):
        raise ReservedParameterError(
            f"Tool {tool_name!r}: parameter {name!r} is reserved for the approval machinery.",
            hint="Rename it. Reserved: names starting with '_' and "
            + ", ".join(sorted(RESERVED_PARAMETER_NAMES))
            + ". Approval is decided by a human in the host, never by a tool argument.",
            tool=tool_name,
            argument=name,
        )


def _annotated_description(annotation: Any) -> str | None:
    if get_origin(annotation) is Annotated:
        for meta in get_args(annotation)[1:]:
            if isinstance(meta, FieldInfo) and meta.description:
                return meta.description
    return None


def iter_subschemas(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Yield ``schema`` and every schema nested in it (properties, items, anyOf, $defs, ...)."""
    yield schema
    for key in ("properties", "$defs"):
        for child in schema.get(key, {}).values():
            if isinstance(child, dict):
                yield from iter_subschemas(child)
    for key in ("items", "additionalProperties", "not"):
        child = schema.get(key)
        if isinstance(child, dict):
            yield from iter_subschemas(child)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for child in schema.get(key, []):
            if isinstance(child, dict):
                yield from iter_subschemas(child)


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's titles and close every declared object."""
    for sub in iter_subschemas(schema):
        sub.pop("title", None)
        if sub.get("type") == "object" and "properties" in sub:
            sub.setdefault("additionalProperties", False)
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    ordered = {"type": "object", "properties": schema["properties"]}
    ordered["required"] = schema["required"]
    ordered["additionalProperties"] = False
    if "$defs" in schema:
        ordered["$defs"] = schema["$defs"]
    return ordered
