"""Validating edited arguments before they become a superseding proposal."""

from __future__ import annotations

import json
from typing import Any

from supervisor.errors import SupervisorError
from supervisor.tools.policy import is_reserved_name


class InvalidEdit(SupervisorError):
    """Edited arguments are not acceptable (not JSON, not an object, or against the schema)."""

    code = "invalid_edit"


def parse_edited_arguments(text: str, schema: dict[str, Any] | None) -> dict[str, Any]:
    """Parse an edited argument set and check it against the tool's JSON Schema when known.

    Reserved names (``approved``, ``confirm``, ``proposal_id``, any ``_name``...) are refused
    whether or not a schema is known; the ledger refuses them again on ``edit``.

    Args:
        text: The editor's content.
        schema: The tool's parameters schema from the tool registry, or ``None``.

    Returns:
        The arguments as a JSON object.

    Raises:
        InvalidEdit: Not JSON, not an object, a reserved name, or rejected by the schema (the
            message says where).
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidEdit(
            f"Not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}.",
            hint="Fix the JSON; arguments are one JSON object.",
        ) from error
    if not isinstance(value, dict):
        raise InvalidEdit("Arguments must be a JSON object.", hint="Wrap them in { ... }.")
    reserved = sorted(name for name in value if is_reserved_name(name))
    if reserved:
        raise InvalidEdit(
            f"{', '.join(repr(name) for name in reserved)}: reserved for the approval "
            "machinery, never an argument.",
            hint="Remove the reserved names (approved, confirm, proposal_id, _anything...).",
        )
    if schema:
        _check_schema(value, schema)
    return value


def _check_schema(value: dict[str, Any], schema: dict[str, Any]) -> None:
    # Imported when an edit is first checked: jsonschema costs the TUI's start a tenth of a
    # second, and most sessions never edit.
    import jsonschema  # type: ignore[import-untyped]  # no stubs; typed as Any at this edge

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(value), key=lambda error: list(error.path))
    if errors:
        first = errors[0]
        where = "$" + "".join(f"[{part!r}]" for part in first.path)
        raise InvalidEdit(
            f"Arguments do not match the tool's schema at {where}: {first.message}",
            hint="Edit the arguments so they satisfy the tool's parameters.",
        )
