"""Why a tool call was refused or failed, in a form both the model and the trace can use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from supervisor.errors import model_error

CallErrorCode = Literal[
    "invalid_json",
    "invalid_arguments",
    "unknown_argument",
    "missing_argument",
    "reserved_argument",
    "tool_exception",
    "result_not_serializable",
    "result_too_large",
    "approval_required",
]


@dataclass(frozen=True)
class ArgumentProblem:
    """One thing wrong with the arguments: where, what was expected, what came."""

    code: CallErrorCode
    argument: str | None
    expected: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form, without ``None`` fields."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.argument is not None:
            body["argument"] = self.argument
        if self.expected:
            body["expected"] = self.expected
        return body


@dataclass(eq=False)
class ToolCallError(Exception):
    """A governed call that was refused before running, or failed while running.

    Attributes:
        code: Stable code the model and scripts match on.
        message: Safe to show the model: never exception text from inside the tool.
        tool_name: The tool called.
        problems: Per-argument details for argument errors.
        detail: Redacted diagnostic for the trace only (e.g. the exception and its frames).
    """

    code: CallErrorCode
    message: str
    tool_name: str
    problems: tuple[ArgumentProblem, ...] = field(default=())
    detail: str | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def to_model(self) -> dict[str, Any]:
        """What the model receives instead of a result: code, safe message, the problems."""
        fields: dict[str, Any] = {}
        if self.problems:
            first = self.problems[0]
            if first.argument is not None:
                fields["argument"] = first.argument
            if first.expected:
                fields["expected"] = first.expected
            if len(self.problems) > 1:
                fields["problems"] = [problem.to_dict() for problem in self.problems]
        return model_error(self.code, self.message, **fields)
