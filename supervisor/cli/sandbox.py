"""``supervisor sandbox``: run one command in the code sandbox as an audited operator action."""

from __future__ import annotations

import getpass
import signal
import sys
from types import FrameType

import click


@click.group()
def sandbox() -> None:
    """Run commands in the code sandbox (local bubblewrap or E2B)."""


@sandbox.command("exec", context_settings={"ignore_unknown_options": True})
@click.option(
    "--backend",
    type=click.Choice(["local", "e2b"]),
    default=None,
    help="Sandbox backend (default: e2b when E2B_API_KEY is set, else local).",
)
@click.option(
    "--timeout",
    "timeout_seconds",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Wall-clock limit in seconds.",
)
@click.option(
    "--db", "db_url", metavar="URL", default=None,
    help="Ledger URL or SQLite path (default: SUPERVISOR_DB or the user's ledger).",
)  # fmt: skip
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def sandbox_exec(
    backend: str | None, timeout_seconds: float, db_url: str | None, command: tuple[str, ...]
) -> None:
    """Run COMMAND in the sandbox; its exit code, stdout and stderr pass through.

    The run is recorded like an agent's (process table and trace) with the operator as actor.
    Use `--` before the command: supervisor sandbox exec -- python3 -c 'print(1)'
    SIGTERM or SIGHUP stops the run and still records how it ended and deletes its work
    directory; after a SIGKILL the next run (or `supervisor doctor`) does both.
    """
    from sandboxes.runner import SandboxSettings, run_in_sandbox
    from supervisor.cli.proposals import ledger_url
    from supervisor.store.provider import SQLModelProvider

    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGHUP, _exit_on_signal)

    settings = SandboxSettings(
        backend=backend,
        timeout_seconds=timeout_seconds,
        ledger=SQLModelProvider(ledger_url(db_url)).ledger,
    )
    result = run_in_sandbox(settings, argv=list(command), actor=f"operator:{getpass.getuser()}")
    sys.stdout.write(result.stdout)
    sys.stdout.flush()
    sys.stderr.write(result.stderr)
    notes = []
    if result.stdout_truncated or result.stderr_truncated:
        notes.append(
            f"output capped: {result.stdout_bytes} stdout / {result.stderr_bytes} stderr bytes "
            f"written (blobs: {result.stdout_blob or '-'} / {result.stderr_blob or '-'})"
        )
    if result.killed:
        notes.append(f"killed: {result.kill_reason}")
    for note in notes:
        sys.stderr.write(f"[sandbox {result.process_id}] {note}\n")
    sys.stderr.flush()
    sys.exit(result.exit_code if result.exit_code is not None else 1)


def _exit_on_signal(signum: int, _frame: FrameType | None) -> None:
    """Turn SIGTERM/SIGHUP into SystemExit so the run's cleanup (kill, record, rmdir) runs."""
    signal.signal(signum, signal.SIG_IGN)  # a second signal must not cut the cleanup short
    raise SystemExit(128 + signum)
