"""Typed errors of the toolbox, each with a stable ``code`` the runtime shows the model."""

from __future__ import annotations

from typing import ClassVar

from supervisor.errors import SupervisorError, ToolDefinitionError


class ToolboxError(SupervisorError):
    """Base of the toolbox's errors."""

    code: ClassVar[str] = "toolbox_error"


class UnknownToolHandle(ToolboxError, LookupError):
    """No tool in this toolbox has that handle."""

    code = "unknown_tool_handle"


class ToolOutOfScope(ToolboxError, PermissionError):
    """The handle exists but the tool is outside the caller's policy, domains or user.

    The message and details never name the tool, so the model learns nothing about it; the
    host reads :attr:`tool_name`.
    """

    code = "tool_out_of_scope"

    def __init__(self, message: str, *, tool_name: str, hint: str | None = None, **details: object):
        super().__init__(message, hint=hint, **details)
        self.tool_name = tool_name


class InvalidInvocation(ToolboxError, ValueError):
    """A meta-tool call's arguments do not have the declared shape."""

    code = "invalid_tool_invocation"


class ReservedToolName(ToolboxError, ToolDefinitionError):
    """A user tool uses a name reserved for the toolbox's meta-tools."""

    code = "reserved_tool_name"
