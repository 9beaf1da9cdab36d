"""``supervisor run MODULE:FACTORY --input TEXT``: one supervised agent run."""

from __future__ import annotations

import os
import shlex
import sys

import click


@click.command("run")
@click.argument("reference", metavar="MODULE:FACTORY")
@click.option("--input", "text", required=True, help="The user's message for the agent.")
@click.option(
    "--db", "db_url", metavar="URL", default=None, help="Ledger URL or SQLite path (SUPERVISOR_DB)."
)
@click.option("--thread", "thread_id", default=None, help="Continue this conversation thread.")
@click.option("--process-id", default=None, help="Id of this run in the process table.")
@click.option(
    "--log", "log_path", default=None, help="Where this run's output goes (recorded only)."
)
@click.option(
    "--decision-timeout", type=float, default=24 * 3600.0, show_default=True,
    help="Seconds to wait for each human decision.",
)  # fmt: skip
def run(
    reference: str,
    text: str,
    db_url: str | None,
    thread_id: str | None,
    process_id: str | None,
    log_path: str | None,
    decision_timeout: float,
) -> None:
    """Run the agent made by MODULE:FACTORY as a supervised process.

    The factory (a zero-argument callable returning a MemAgent or MemAgentBuilder) is imported
    because you named it here. The run appears in the supervisor's processes pane, waits for
    decisions taken in the TUI or with `supervisor proposals`, and resumes.
    """
    from supervisor.cli.output import echo_line
    from supervisor.runtime.host import run_supervised

    if db_url is not None:
        from supervisor.store.urls import to_ledger_url

        # The factory's SQLModelProvider() picks the ledger up from here (a path made absolute).
        os.environ["SUPERVISOR_DB"] = to_ledger_url(db_url)
    argv = ["supervisor", "run", reference, "--input", text]
    if thread_id:
        argv += ["--thread", thread_id]
    if log_path:
        argv += ["--log", log_path]
    code = run_supervised(
        reference, text, command=shlex.join(argv), echo=echo_line, thread_id=thread_id,
        process_id=process_id, decision_timeout=decision_timeout, log_path=log_path,
    )  # fmt: skip
    sys.exit(code)
