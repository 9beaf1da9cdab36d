"""``supervisor resume PROPOSAL_ID``: drive a decided proposal to its end when its agent is gone.

Also ``supervisor allowlist add|remove|list|path``: the operator's list of import references a
resume may import (:mod:`supervisor.runtime.allowlist`).
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import TYPE_CHECKING

import click

from supervisor.cli.output import echo_json, echo_line
from supervisor.cli.proposals import db_option, ledger_url

if TYPE_CHECKING:
    from supervisor.runtime.restart import ResumeRequest


@click.command("resume")
@click.argument("proposal_id", required=False)
@db_option
@click.option(
    "--continue-model/--no-continue-model", default=True, show_default=True,
    help="After the call, go on with the model until the run ends (waiting for any new "
    "decisions), or stop once the call's outcome is recorded.",
)  # fmt: skip
@click.option(
    "--allow", "allow", multiple=True, metavar="MODULE:NAME",
    help="Also allow this import reference for this resume only (repeatable).",
)  # fmt: skip
@click.option("--process-id", default=None, help="Id of this resume in the process table.")
@click.option("--log", "log_path", default=None, help="Where this resume's output goes (recorded).")
@click.option(
    "--decision-timeout", type=float, default=24 * 3600.0, show_default=True,
    help="Seconds to wait for each further human decision.",
)  # fmt: skip
@click.option(
    "--standby", is_flag=True,
    help="Start, open the ledger, then read the PROPOSAL_ID from stdin (a warm process the TUI "
    "keeps ready; EOF exits).",
)  # fmt: skip
def resume(
    proposal_id: str | None,
    db_url: str | None,
    continue_model: bool,
    allow: tuple[str, ...],
    process_id: str | None,
    log_path: str | None,
    decision_timeout: float,
    standby: bool,
) -> None:
    """Run a decided proposal whose agent process is gone, then continue its model turn.

    The agent is re-created from the ledger: the factory `supervisor run` recorded for it, or
    its saved configuration with tools rebound from their import references; each is imported
    only when it is on the resume allowlist (`supervisor allowlist`). The call is claimed once
    and run, its outcome recorded, and the model goes on to the end of the run as a supervised
    process the TUI follows and stops. A second resume of the same proposal runs nothing.
    """
    from supervisor.runtime.restart import resume_supervised
    from supervisor.store.provider import SQLModelProvider

    if (proposal_id is None) != standby:
        raise click.UsageError("Give a PROPOSAL_ID, or --standby to read one from stdin.")
    url = ledger_url(db_url)
    if url is not None:
        os.environ["SUPERVISOR_DB"] = url  # the factory's SQLModelProvider() reads it
    with SQLModelProvider(url, must_exist=True) as provider:
        if standby:
            warm_up()
            proposal_id = sys.stdin.readline().strip()
            if not proposal_id:
                return  # no work came: the supervisor closed
        assert proposal_id is not None
        from supervisor.ledger.ids import resolve_id

        proposal_id = resolve_id(provider.ledger.repository, "proposal", proposal_id)
        request = _request(proposal_id, continue_model, log_path, process_id, decision_timeout,
                           allow)  # fmt: skip
        from supervisor.services.recovery import recover_now

        recovered = recover_now(provider.ledger)
        for execution in recovered:
            click.echo(f"[resume] {execution.proposal_id} needs reconciliation (its executor died)")
        code = resume_supervised(provider, request, click.echo)
    sys.exit(code)


def warm_up() -> None:
    """Import what re-creating an agent and calling its model need, before any work arrives."""
    import openai  # noqa: F401  (the model client: the largest import a run makes)

    import supervisor.runtime.builder  # noqa: F401


def _request(
    proposal_id: str,
    continue_model: bool,
    log_path: str | None,
    process_id: str | None,
    decision_timeout: float,
    allow: tuple[str, ...],
) -> ResumeRequest:
    from supervisor.runtime.allowlist import effective_allowlist
    from supervisor.runtime.restart import ResumeRequest

    argv = ["supervisor", "resume", proposal_id]
    if not continue_model:
        argv.append("--no-continue-model")
    if log_path:
        argv += ["--log", log_path]
    return ResumeRequest(
        proposal_id=proposal_id, command=shlex.join(argv), continue_model=continue_model,
        process_id=process_id, decision_timeout=decision_timeout,
        allowlist=effective_allowlist(allow),
    )  # fmt: skip


@click.group("allowlist")
def allowlist() -> None:
    """The import references `supervisor resume` may import (the operator's file)."""


@allowlist.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def allowlist_list(as_json: bool) -> None:
    """Show the allowed references: the built-ins and the operator's file."""
    from supervisor.runtime.allowlist import BUILTIN, allowlist_path, read_allowlist

    listed = read_allowlist()
    if as_json:
        echo_json({"path": str(allowlist_path()), "builtin": list(BUILTIN), "allowed": listed})
        return
    for reference in BUILTIN:
        echo_line(f"{reference}  (shipped with the package)")
    for reference in listed:
        echo_line(reference)


@allowlist.command("add")
@click.argument("reference", metavar="MODULE:NAME")
def allowlist_add(reference: str) -> None:
    """Allow MODULE:NAME (or MODULE:*) after you reviewed it."""
    from supervisor.runtime.allowlist import add_reference, allowlist_path

    added = add_reference(reference)
    state = "added to" if added else "already allowed in"
    echo_line(f"{reference.strip()} {state} {allowlist_path()}")


@allowlist.command("remove")
@click.argument("reference", metavar="MODULE:NAME")
def allowlist_remove(reference: str) -> None:
    """Stop allowing MODULE:NAME (the exact line)."""
    from supervisor.runtime.allowlist import allowlist_path, remove_reference

    removed = remove_reference(reference)
    state = "removed from" if removed else "was not listed in"
    echo_line(f"{reference.strip()} {state} {allowlist_path()}")


@allowlist.command("path")
def allowlist_path_command() -> None:
    """Print where the allowlist file is (SUPERVISOR_ALLOWLIST overrides it)."""
    from supervisor.runtime.allowlist import allowlist_path

    echo_line(str(allowlist_path()))
