"""The OpenAI function-tool form of a governed tool, in strict mode when it fits.

OpenAI's strict mode (structured outputs) accepts a subset of JSON Schema: every object closed
(``additionalProperties: false``) and every property listed in ``required``; no ``default``;
a limited set of keywords. The transform:

1. Each optional top-level parameter (one with a default) becomes required and nullable
   (``anyOf: [<type>, {"type": "null"}]``); its description gains "Default: <value>." The
   dispatcher treats ``null`` for such a parameter as "use the default" (see
   :attr:`OpenAITool.null_means_default`).
2. ``default`` keywords are removed everywhere.

It falls back to ``strict: false`` with the full schema (the one dispatch enforces) when the
schema uses anything outside the subset: free-form maps (``dict[str, X]``), tuples
(``prefixItems``), sets (``uniqueItems``), ``oneOf``/``allOf``/``not``, or a nested object with an
optional property whose type does not already admit ``null``. Validation is identical either way.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from supervisor.tools.schema import iter_subschemas

_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "description",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "pattern",
        "format",
        "minItems",
        "maxItems",
        "default",
    }
)


@dataclass(frozen=True)
class OpenAITool:
    """A tool as sent in a chat-completions request.

    Attributes:
        definition: ``{"type": "function", "function": {...}}``.
        strict: Whether the strict form was emitted.
        null_means_default: Parameters made nullable by the strict transform, for which the
            dispatcher maps ``null`` to the Python default.
    """

    definition: dict[str, Any]
    strict: bool
    null_means_default: frozenset[str]


def openai_tool(name: str, description: str, parameters: dict[str, Any]) -> OpenAITool:
    """Build the OpenAI function-tool form of a tool (strict when expressible)."""
    strict_parameters = _to_strict(parameters)
    if strict_parameters is None:
        function = {
            "name": name,
            "description": description,
            "parameters": parameters,
            "strict": False,
        }
        return OpenAITool({"type": "function", "function": function}, False, frozenset())
    converted, nullable = strict_parameters
    function = {"name": name, "description": description, "parameters": converted, "strict": True}
    return OpenAITool({"type": "function", "function": function}, True, nullable)


def _admits_null(schema: dict[str, Any]) -> bool:
    if schema.get("type") == "null":
        return True
    return any(_admits_null(option) for option in schema.get("anyOf", []))


def _to_strict(parameters: dict[str, Any]) -> tuple[dict[str, Any], frozenset[str]] | None:
    schema = copy.deepcopy(parameters)
    for sub in iter_subschemas(schema):
        if not set(sub) <= _STRICT_KEYWORDS:
            return None
        extra = sub.get("additionalProperties")
        if sub.get("type") == "object" and extra is not False:
            return None
        if sub is not schema and sub.get("type") == "object":
            required = set(sub.get("required", []))
            for prop_name, prop in sub.get("properties", {}).items():
                if prop_name not in required and not _admits_null(prop):
                    return None
            sub["required"] = list(sub.get("properties", {}))
    nullable: set[str] = set()
    required = set(schema.get("required", []))
    for prop_name, prop in list(schema["properties"].items()):
        if prop_name in required:
            continue
        default_note = ""
        if "default" in prop:
            default_note = f"Default: {json.dumps(prop['default'], ensure_ascii=False)}."
        description = " ".join(part for part in (prop.pop("description", ""), default_note) if part)
        if not _admits_null(prop):
            prop = {"anyOf": [prop, {"type": "null"}]}
            nullable.add(prop_name)
        if description:
            prop["description"] = description
        schema["properties"][prop_name] = prop
    schema["required"] = list(schema["properties"])
    for sub in iter_subschemas(schema):
        sub.pop("default", None)
    return schema, frozenset(nullable)
