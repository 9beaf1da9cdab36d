"""The two meta-tools a model gets with a toolbox: discover tools, invoke a tool by handle.

Both are OpenAI function tools in strict mode. Strict mode needs every object closed, so
``invoke_tool`` takes the target tool's arguments as JSON object text (``arguments_json``);
:func:`parse_invocation` decodes it (and also accepts an already-decoded object).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from supervisor.toolbox.errors import InvalidInvocation

DISCOVER_TOOL_NAME = "discover_tools"
INVOKE_TOOL_NAME = "invoke_tool"
META_TOOL_NAMES = frozenset({DISCOVER_TOOL_NAME, INVOKE_TOOL_NAME})

#: The most tools one discovery call returns.
MAX_DISCOVER_LIMIT = 20

_DISCOVER_DEFINITION: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": DISCOVER_TOOL_NAME,
        "description": (
            "Search the tools available to you that are not listed above. Returns, best match "
            "first, each tool's handle, name, description, domains, whether a human must approve "
            "it, and its JSON Schema parameters. Call a listed tool directly, or a discovered "
            f"one through {INVOKE_TOOL_NAME} with its handle."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "What the tool should do, in a few words.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_DISCOVER_LIMIT,
                    "description": f"How many tools to return (1-{MAX_DISCOVER_LIMIT}).",
                },
            },
            "required": ["query", "limit"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}

_INVOKE_DEFINITION: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": INVOKE_TOOL_NAME,
        "description": (
            f"Call a tool found with {DISCOVER_TOOL_NAME} by its handle. The arguments must "
            "match that tool's parameters schema; calls that need approval wait for a human."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "handle": {
                    "type": "string",
                    "description": f"The tool handle returned by {DISCOVER_TOOL_NAME}.",
                },
                "arguments_json": {
                    "type": "string",
                    "description": 'The tool\'s arguments as a JSON object, e.g. {"sku": "A1"}.',
                },
            },
            "required": ["handle", "arguments_json"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}


def meta_tool_definitions() -> list[dict[str, Any]]:
    """Fresh copies of the two meta-tool definitions (discover first, then invoke)."""
    return [
        json.loads(json.dumps(_DISCOVER_DEFINITION)),
        json.loads(json.dumps(_INVOKE_DEFINITION)),
    ]


@dataclass(frozen=True)
class Discovery:
    """A decoded ``discover_tools`` call."""

    query: str
    limit: int


@dataclass(frozen=True)
class Invocation:
    """A decoded ``invoke_tool`` call: the handle and the target tool's arguments."""

    handle: str
    arguments: dict[str, Any]


def _as_object(raw: str | Mapping[str, Any], what: str) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            decoded: Any = json.loads(raw)
        except json.JSONDecodeError as error:
            raise InvalidInvocation(
                f"{what} is not valid JSON ({error.msg} at position {error.pos}).",
                hint="Send a JSON object.",
            ) from None
    else:
        decoded = dict(raw)
    if not isinstance(decoded, dict):
        raise InvalidInvocation(
            f"{what} is a JSON {type(decoded).__name__}, not an object.", hint="Send an object."
        )
    return decoded


def parse_discovery(raw: str | Mapping[str, Any]) -> Discovery:
    """Decode a ``discover_tools`` call's arguments.

    Args:
        raw: The call's arguments (JSON text or decoded).

    Returns:
        The query and a limit clamped to ``1..MAX_DISCOVER_LIMIT``.

    Raises:
        InvalidInvocation: not an object, or ``query``/``limit`` of the wrong type.
    """
    arguments = _as_object(raw, f"The {DISCOVER_TOOL_NAME} arguments")
    query = arguments.get("query")
    limit = arguments.get("limit", MAX_DISCOVER_LIMIT)
    if not isinstance(query, str):
        raise InvalidInvocation("query must be a string.", hint="Describe the tool you need.")
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidInvocation("limit must be an integer.", hint=f"Use 1-{MAX_DISCOVER_LIMIT}.")
    return Discovery(query=query, limit=max(1, min(MAX_DISCOVER_LIMIT, limit)))


def parse_invocation(raw: str | Mapping[str, Any]) -> Invocation:
    """Decode an ``invoke_tool`` call's arguments.

    Args:
        raw: The call's arguments (JSON text or decoded). ``arguments_json`` may be JSON object
            text (the strict schema's form) or an object; ``arguments`` is accepted as an alias.

    Returns:
        The handle and the target tool's arguments (not yet validated: the tool's own dispatch
        validates them).

    Raises:
        InvalidInvocation: the handle is missing or the arguments are not an object.
    """
    call = _as_object(raw, f"The {INVOKE_TOOL_NAME} arguments")
    handle = call.get("handle")
    if not isinstance(handle, str) or not handle:
        raise InvalidInvocation(
            "handle must be a non-empty string.", hint=f"Use a handle from {DISCOVER_TOOL_NAME}."
        )
    payload = call.get("arguments_json", call.get("arguments", {}))
    if payload is None:
        payload = {}
    if not isinstance(payload, (str, Mapping)):
        raise InvalidInvocation("arguments_json must be JSON object text.", hint='e.g. "{}".')
    return Invocation(handle=handle, arguments=_as_object(payload, "arguments_json"))
