"""Typed errors shared by the SDK, the ledger and the CLI.

Every error carries a stable ``code`` (what scripts and the model match on) and a message that
says what happened and what to do about it.
"""

from __future__ import annotations

from typing import Any, ClassVar


class SupervisorError(Exception):
    """Base of every error the SDK raises on purpose."""

    code: ClassVar[str] = "supervisor_error"

    def __init__(self, message: str, *, hint: str | None = None, **details: Any) -> None:
        self.message = message
        self.hint = hint
        self.details: dict[str, Any] = details
        super().__init__(f"{message} {hint}" if hint else message)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: code, message, hint and details."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.hint:
            body["hint"] = self.hint
        if self.details:
            body["details"] = self.details
        return body


class ToolDefinitionError(SupervisorError, TypeError):
    """A function cannot be governed as written (bad signature, hints or reserved names)."""

    code = "invalid_tool_definition"


class ReservedParameterError(ToolDefinitionError):
    """A governed tool declares a parameter name reserved for the approval machinery."""

    code = "reserved_parameter"


class PolicyError(SupervisorError, ValueError):
    """A governed tool's policy flags contradict each other."""

    code = "incoherent_policy"


class OutcomeError(SupervisorError, ValueError):
    """A ToolOutcome claims something its own fields contradict."""

    code = "incoherent_outcome"


class CanonicalJSONError(SupervisorError, ValueError):
    """A value cannot be written as canonical JSON (NaN, Infinity, non-string keys, objects)."""

    code = "not_canonical_json"


class DuplicateToolError(SupervisorError, ValueError):
    """A registry already holds a different tool under that name."""

    code = "duplicate_tool"


class UnknownToolError(SupervisorError, LookupError):
    """No tool with that name or handle is registered."""

    code = "unknown_tool"


class ReferenceNotAllowed(SupervisorError, PermissionError):
    """An import reference is not on the explicit allowlist, so it is never imported."""

    code = "reference_not_allowed"


class ReferenceMismatch(SupervisorError, ValueError):
    """An import reference resolved to something other than the governed tool expected."""

    code = "reference_mismatch"


class ReferenceNotImportable(ReferenceMismatch):
    """An allowlisted import reference names a module that cannot be imported."""

    code = "reference_not_importable"


def model_error(code: str, message: str | None = None, **fields: Any) -> dict[str, Any]:
    """The ``{"error": {...}}`` body a model receives in place of a result.

    Only what the model may see goes in: the stable code, a message written for the model, and
    call-specific fields (the argument at fault, a reviewer's reason), in that order. A host
    error's ``hint`` and ``details`` are for the operator and never go in.
    """
    body: dict[str, Any] = {"code": code}
    if message is not None:
        body["message"] = message
    body.update(fields)
    return {"error": body}
