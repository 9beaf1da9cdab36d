"""Typed errors that only the command line raises (bad argv, trace files given to review)."""

from __future__ import annotations

from supervisor.errors import SupervisorError


class ArgumentNotText(SupervisorError, ValueError):
    """A command-line argument is not valid UTF-8, so it cannot name anything in the ledger."""

    code = "argument_not_utf8"

    def __init__(self, position: int, shown: str) -> None:
        super().__init__(
            f"Argument {position} ({shown}) is not valid UTF-8 text; nothing was done.",
            hint="Pass ids, names and paths as UTF-8 (check the shell's quoting and locale).",
            position=position,
        )


class TraceFileNotFound(SupervisorError, FileNotFoundError):
    """``traces review`` was given a trace file that does not exist."""

    code = "trace_file_not_found"

    def __init__(self, path: str) -> None:
        super().__init__(
            f"No trace file at {path}.",
            hint="Export one with `supervisor traces export -o trace.jsonl`, or pass a ledger.",
            path=path,
        )


class TraceFileInvalid(SupervisorError, ValueError):
    """A file given to ``traces review`` is not a JSONL trace export."""

    code = "invalid_trace_file"

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(
            f"{where} is not a trace event: {reason}.",
            hint="`traces review` reads the JSON lines of `supervisor traces export "
            "--format jsonl` (one event per line), or a ledger.",
            where=where,
        )


class EditArgumentsInvalid(SupervisorError, ValueError):
    """``proposals edit`` was given arguments that are not one JSON object (or a bad ``--set``)."""

    code = "invalid_edit_arguments"

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"The edited arguments are not usable: {reason}; nothing was changed.",
            hint="Pass --args '{\"key\": value}' (one JSON object) or --set KEY=JSON (repeatable).",
        )


class ReasonRequired(SupervisorError, ValueError):
    """A verb that records a human's finding was given an empty reason."""

    code = "reason_required"

    def __init__(self, option: str, what: str) -> None:
        super().__init__(
            f"{option} is empty; nothing was recorded.",
            hint=f"Give {option} and {what} (it is audited).",
            option=option,
        )
