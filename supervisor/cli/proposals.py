"""``supervisor proposals``: list, show, decide, edit and reconcile proposals without the TUI
(via=cli).

Every command takes ``--db URL`` (default: ``SUPERVISOR_DB`` or the user's ledger) and refuses
a ledger that does not exist (``ledger_not_found``) instead of creating one; ``list`` and
``show`` open it read-only. Decisions record the approver as ``--approver`` or OS user@host; a
conflict (someone else decided first) prints who won and when and exits non-zero (2), like
every typed error. Every verb first runs recovery (:func:`open_recovered`), so a call whose
executor died mid-call shows as ``needs_reconciliation`` without anyone asking. Everything
printed is escaped (:mod:`supervisor.cli.output`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import click

from supervisor.cli.output import echo_json, echo_line
from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import APPROVER_ID_MAX, Proposal, ProposalStatus, ProposalWaiter
from supervisor.ledger.service import ApprovalLedger

F = TypeVar("F", bound=Callable[..., Any])


def db_option(function: F) -> F:
    """The ``--db URL`` option every ledger command takes."""
    return click.option(
        "--db",
        "db_url",
        metavar="URL",
        default=None,
        help="Ledger URL or SQLite path (default: SUPERVISOR_DB or the user's ledger).",
    )(function)


def ledger_url(db_url: str | None) -> str | None:
    """``--db`` as a URL: a SQLite path or a URL, by the rule every entry point shares
    (:func:`supervisor.store.urls.to_ledger_url`); ``None`` (the default ledger) passes.

    Raises:
        UnsupportedLedgerUrl: ``--db ''``.
        LedgerPathInvalid: A path naming the home folder of an unknown user.
    """
    if db_url is None:
        return None
    from supervisor.store.urls import to_ledger_url

    return to_ledger_url(db_url)


@contextmanager
def open_ledger(
    db_url: str | None, *, read_only: bool = False, must_exist: bool = False
) -> Iterator[ApprovalLedger]:
    """Open the ledger for one command and close it afterwards.

    Args:
        db_url: ``--db`` as given (a path or a URL; ``None`` for the default ledger).
        read_only: The command only reads: never create, migrate or write the ledger, so a
            mistyped path fails with ``ledger_not_found`` and read-only storage still works.
        must_exist: The command writes but cannot mean a new ledger (e.g. deciding a proposal).
    """
    from supervisor.store.provider import SQLModelProvider

    provider = SQLModelProvider(ledger_url(db_url), read_only=read_only, must_exist=must_exist)
    with provider:
        yield provider.ledger


@contextmanager
def open_recovered(db_url: str | None, *, read_only: bool = False) -> Iterator[ApprovalLedger]:
    """:func:`open_ledger` after recovery: every ``proposals`` verb first flags the calls whose
    executor is gone as ``needs_reconciliation`` (never re-run), so what it shows or decides is
    current. A read-only verb opens a writable ledger only when there is something to flag.
    """
    from supervisor.services.recovery import recover_for_reader, recover_now

    with open_ledger(db_url, read_only=read_only, must_exist=not read_only) as ledger:
        if read_only:
            recover_for_reader(ledger, lambda: open_ledger(db_url, must_exist=True))
        else:
            with suppress(LedgerError):  # the verb's own read or write reports the ledger
                recover_now(ledger)
        yield ledger


def full_id(ledger: ApprovalLedger, given: str) -> str:
    """The proposal id ``given`` names: the full id, or a unique prefix of at least four
    characters (an ambiguous one lists the candidates; see :mod:`supervisor.ledger.ids`)."""
    from supervisor.ledger.ids import resolve_id

    return resolve_id(ledger.repository, "proposal", given)


def proposal_json(proposal: Proposal, waiter: ProposalWaiter | None = None) -> dict[str, Any]:
    """A proposal as JSON data, with its waiting process and whether it is orphaned.

    ``orphaned`` is true for a pending or approved proposal whose waiting process is gone (it
    exited or its lease ran out); ``waiter`` is ``null`` when no process was recorded.
    """
    data: dict[str, Any] = proposal.model_dump(mode="json")
    data["decided_by"] = proposal.decided_by
    data["waiter"] = waiter.summary() if waiter is not None else None
    data["orphaned"] = is_orphaned(proposal, waiter)
    return data


def is_orphaned(proposal: Proposal, waiter: ProposalWaiter | None) -> bool:
    """A pending or approved proposal whose recorded waiting process is gone."""
    return waiter is not None and waiter.orphans(proposal)


def _age(moment: datetime) -> str:
    seconds = int((moment - datetime.now(UTC)).total_seconds())
    if seconds <= 0:
        return "expired"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def check_label(option: str, value: str | None, limit: int) -> None:
    """Refuse ``value`` before the ledger is opened when its column cannot hold it.

    PostgreSQL would refuse it mid-transaction and SQLite would store it anyway; both engines
    get the same typed error, and nothing is written.

    Raises:
        LedgerValueRejected: ``value`` has more than ``limit`` characters.
    """
    if value is not None and len(value) > limit:
        from supervisor.ledger.errors import LedgerValueRejected

        raise LedgerValueRejected(
            f"{option} is {len(value)} characters long and the ledger keeps at most {limit}",
            hint=f"Give a shorter {option} (at most {limit} characters).",
            option=option,
            length=len(value),
            limit=limit,
        )


def _approver(approver: str | None) -> tuple[str, Any]:
    from supervisor.services.identity import ApproverIdentity

    check_label("--approver", approver, APPROVER_ID_MAX)
    identity = ApproverIdentity.current("cli", approver_id=approver)
    check_label("the approver id (OS user@host)", identity.approver_id, APPROVER_ID_MAX)
    return identity.approver_id, identity.context


@click.group()
def proposals() -> None:
    """List, show, decide, edit and reconcile proposals (headless)."""


@proposals.command("list")
@click.option(
    "--status",
    type=click.Choice([status.value for status in ProposalStatus]),
    default="pending",
    show_default=True,
)
@click.option("--all", "all_statuses", is_flag=True, help="Every status.")
@click.option("--owner", default=None, help="Requesting agent id.")
@click.option("--tool", "tool_name", default=None, help="Tool name.")
@click.option("--thread", "--session", "thread_id", default=None, help="Agent thread (session) id.")
@click.option("--domain", default=None, help="Policy domain.")
@click.option(
    "--runtime", default=None, help="Runtime that asked: sdk, claude-code, mcp:SERVER, acp:AGENT."
)
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 1000))
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@db_option
def list_proposals(
    status: str,
    all_statuses: bool,
    owner: str | None,
    tool_name: str | None,
    thread_id: str | None,
    domain: str | None,
    runtime: str | None,
    limit: int,
    as_json: bool,
    db_url: str | None,
) -> None:
    """List proposals (pending by default), oldest first."""
    with open_recovered(db_url, read_only=True) as ledger:
        page = ledger.list(
            status=None if all_statuses else status,
            owner=owner,
            tool_name=tool_name,
            thread_id=thread_id,
            domain=domain,
            runtime=runtime,
            limit=limit,
        )
        waiters = ledger.waiters(proposal.proposal_id for proposal in page.items)
    if as_json:
        items = [proposal_json(p, waiters.get(p.proposal_id)) for p in page.items]
        echo_json({"items": items, "next_cursor": page.next_cursor})
        return
    if not page.items:
        click.echo("No proposals.")
        return
    for proposal in page.items:
        orphaned = is_orphaned(proposal, waiters.get(proposal.proposal_id))
        echo_line(
            f"{proposal.proposal_id}  {proposal.status.value:<10} {proposal.tool_name:<20} "
            f"{proposal.owner or '-':<14} {proposal.runtime:<11} {proposal.thread_id or '-':<10} "
            f"{','.join(proposal.domains) or '-':<10} {_age(proposal.expires_at)}"
            + ("  orphaned" if orphaned else "")
        )


@proposals.command("show")
@click.argument("proposal_id")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@db_option
def show_proposal(proposal_id: str, as_json: bool, db_url: str | None) -> None:
    """Show one proposal with its full arguments and decision history.

    A claimed call also says what ran it (executor, pid, host, claimed at); one that stopped
    mid-call says why it was flagged and how to reconcile it.
    """
    with open_recovered(db_url, read_only=True) as ledger:
        proposal_id = full_id(ledger, proposal_id)
        proposal = ledger.get(proposal_id)
        history = _history(ledger, proposal_id)
        waiter = ledger.waiters([proposal_id]).get(proposal_id)
        execution = ledger.execution(proposal_id)
        found = ledger.reconciliation(proposal_id) if execution is not None else None
    if as_json:
        body = proposal_json(proposal, waiter)
        body["execution"] = execution.model_dump(mode="json") if execution else None
        body["reconciliation"] = found.model_dump(mode="json") if found else None
        body["history"] = [record.model_dump(mode="json") for record in history]
        echo_json(body)
        return
    from supervisor.services.reconciliation import stopped_lines
    from supervisor.services.rendering import render_arguments

    rows = [
        f"proposal    {proposal.proposal_id}",
        f"tool        {proposal.tool_name}",
        f"status      {proposal.status.value}",
        f"args hash   {proposal.args_hash}",
        f"policy      {proposal.policy_reason or '-'}",
        f"owner       {proposal.owner or '-'}",
        f"runtime     {proposal.runtime}"
        + (f"   turn {proposal.turn_id}" if proposal.turn_id else ""),
        f"thread      {proposal.thread_id or '-'}",
        f"checkpoint  {proposal.checkpoint_id or '-'}",
        f"domains     {', '.join(proposal.domains) or '-'}",
        f"created     {proposal.created_at.isoformat()}",
        f"expires     {proposal.expires_at.isoformat()}",
    ]
    if waiter is not None:
        label = "orphaned   " if is_orphaned(proposal, waiter) else "waiter     "
        rows.append(f"{label} {waiter.describe()}")
    if proposal.decided_by_rule:
        rows.append(f"decided by  {proposal.decided_by}")
    elif proposal.approver_id:
        rows.append(f"approver    {proposal.approver_id}")
    if proposal.quorum:
        voters = ", ".join(vote.identity for vote in proposal.approvals)
        rows.append(f"quorum      {proposal.quorum}{f' ({voters})' if voters else ''}")
    if proposal.decision_reason:
        rows.append(f"reason      {proposal.decision_reason}")
    if proposal.supersedes_id:
        rows.append(f"supersedes  {proposal.supersedes_id}")
    if proposal.superseded_by_id:
        rows.append(f"superseded by {proposal.superseded_by_id}")
    rows.extend(f"{label:<11} {text}" for label, text in stopped_lines(proposal, execution, found))
    for row in rows:  # one field per line, each escaped on its own
        echo_line(row)
    click.echo("arguments")
    for line in render_arguments(proposal.arguments):
        click.echo(line)  # already escaped line by line
    click.echo("history")
    for record in history:
        echo_line(f"  #{record.seq} {record.at.isoformat()} {record.action} by {record.actor}")


def _history(ledger: ApprovalLedger, proposal_id: str) -> list[Any]:
    found: list[Any] = []
    cursor = 0
    while batch := ledger.events_since(cursor, 2000):
        found.extend(record for record in batch if record.subject == proposal_id)
        cursor = batch[-1].seq
    return found


def _decide(action: str, proposal_id: str, reason: str | None, approver: str | None,
            as_json: bool, db_url: str | None) -> None:  # fmt: skip
    approver_id, context = _approver(approver)
    with open_recovered(db_url) as ledger:
        decide = {"approve": ledger.approve, "reject": ledger.reject, "cancel": ledger.cancel}
        proposal_id = full_id(ledger, proposal_id)
        proposal = decide[action](proposal_id, approver_id, reason, context=context, via="cli")
        waiter = ledger.waiters([proposal.proposal_id]).get(proposal.proposal_id)
    if as_json:
        echo_json(proposal_json(proposal, waiter))
        return
    echo_line(f"{proposal.status.value} {proposal.proposal_id} by {approver_id}")
    if is_orphaned(proposal, waiter):  # approving alone runs nothing: say what will
        echo_line(
            f"  its agent is gone ({waiter.process_id if waiter else '?'}); run it with: "
            f"supervisor resume {proposal.proposal_id}"
        )


def _decision_command(action: str, reason_required: bool) -> click.Command:
    @click.argument("proposal_id")
    @click.option("--reason", required=reason_required, help="Why (audited).")
    @click.option("--approver", default=None, help="Approver id (default: OS user@host).")
    @click.option("--json", "as_json", is_flag=True, help="Print the proposal as JSON.")
    @db_option
    def command(
        proposal_id: str, reason: str | None, approver: str | None, as_json: bool,
        db_url: str | None,
    ) -> None:  # fmt: skip
        _decide(action, proposal_id, reason, approver, as_json, db_url)

    command.__doc__ = {
        "approve": "Approve a pending proposal.",
        "reject": "Reject a pending proposal (a reason is required).",
        "cancel": "Withdraw a pending proposal.",
    }[action]
    return click.command(action)(command)


proposals.add_command(_decision_command("approve", reason_required=False))
proposals.add_command(_decision_command("reject", reason_required=True))
proposals.add_command(_decision_command("cancel", reason_required=False))


def _edited_arguments(proposal: Proposal, args_json: str | None, sets: tuple[str, ...]) -> Any:
    """The arguments an edit proposes: ``--args`` (a whole object), then each ``--set``."""
    from supervisor.cli.errors import EditArgumentsInvalid

    arguments: Any = dict(proposal.arguments)
    if args_json is not None:
        try:
            arguments = json.loads(args_json)
        except ValueError as exc:
            raise EditArgumentsInvalid(f"--args is not JSON ({exc.args[0]})") from None
        if not isinstance(arguments, dict):
            raise EditArgumentsInvalid("--args is not a JSON object")
    for item in sets:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise EditArgumentsInvalid(f"--set {item!r} is not KEY=VALUE")
        try:
            arguments[key] = json.loads(raw)
        except ValueError:
            arguments[key] = raw  # not JSON: the text as written
    if not sets and args_json is None:
        raise EditArgumentsInvalid("give --args or at least one --set")
    return arguments


def _checked_edit(ledger: ApprovalLedger, proposal: Proposal, arguments: Any) -> Any:
    """The TUI's checks of an edit (reserved names; the tool's schema when the registry has
    it), so both refuse the same edits before the ledger does.

    Raises:
        InvalidEdit: A reserved name, or the tool's recorded schema refuses the arguments.
    """
    from supervisor.services.approvals import ApprovalsService
    from supervisor.services.edits import parse_edited_arguments

    schema = ApprovalsService.tool_schema_in(ledger, proposal)
    return parse_edited_arguments(json.dumps(arguments), schema)


@proposals.command("edit")
@click.argument("proposal_id")
@click.option("--args", "args_json", default=None, metavar="JSON", help="The new arguments.")
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=JSON",
    help="Change one top-level argument (the value as JSON, else as text).",
)
@click.option("--reason", default=None, help="Why (audited).")
@click.option("--approver", default=None, help="Approver id (default: OS user@host).")
@click.option("--json", "as_json", is_flag=True, help="Print the new proposal as JSON.")
@db_option
def edit_proposal(
    proposal_id: str, args_json: str | None, sets: tuple[str, ...], reason: str | None,
    approver: str | None, as_json: bool, db_url: str | None,
) -> None:  # fmt: skip
    """Replace a pending proposal's arguments: a new pending proposal supersedes it.

    The new proposal needs its own approval and keeps the original's TTL; the waiting agent
    runs the edited arguments once it is approved, and the model is told the diff.
    """
    from supervisor.ledger.chain import compact_diff

    approver_id, context = _approver(approver)
    with open_recovered(db_url) as ledger:
        proposal_id = full_id(ledger, proposal_id)
        old = ledger.get(proposal_id)
        arguments = _checked_edit(ledger, old, _edited_arguments(old, args_json, sets))
        new = ledger.edit(proposal_id, arguments, approver_id, reason, context=context, via="cli")
    if as_json:
        echo_json(proposal_json(new))
        return
    echo_line(f"superseded {old.proposal_id} by {new.proposal_id} (pending) by {approver_id}")
    for change in compact_diff(old.arguments, new.arguments):
        before = json.dumps(change.get("old"), ensure_ascii=False) if "old" in change else "-"
        after = json.dumps(change.get("new"), ensure_ascii=False) if "new" in change else "-"
        echo_line(f"  {change['path']}: {before} -> {after}")


@proposals.command("reconcile")
@click.argument("proposal_id")
@click.option(
    "--as",
    "outcome",
    type=click.Choice(["executed", "failed"]),
    required=True,
    help="executed: the call took effect; failed: it did not.",
)
@click.option("--reason", required=True, help="What you checked (audited; the agent is told).")
@click.option("--approver", default=None, help="Approver id (default: OS user@host).")
@click.option("--json", "as_json", is_flag=True, help="Print the proposal and execution as JSON.")
@db_option
def reconcile_proposal(
    proposal_id: str, outcome: str, reason: str, approver: str | None, as_json: bool,
    db_url: str | None,
) -> None:  # fmt: skip
    """Record what a call that stopped mid-execution really did (needs_reconciliation only).

    Check the world first (the CRM, the bank, the files): nothing is re-run either way. The
    finding is checked by the approval policy like an approval and audited; the agent's
    thread continues with it when the proposal is resumed.
    """
    from supervisor.cli.errors import ReasonRequired

    if not reason.strip():
        raise ReasonRequired("--reason", "say what you checked")
    finding: Literal["executed", "failed"] = "executed" if outcome == "executed" else "failed"
    approver_id, context = _approver(approver)
    with open_recovered(db_url) as ledger:
        proposal_id = full_id(ledger, proposal_id)
        execution = ledger.reconcile(
            proposal_id, finding, approver_id, reason.strip(), context=context, via="cli"
        )
        proposal = ledger.get(proposal_id)
    if as_json:
        echo_json({**proposal_json(proposal), "execution": execution.model_dump(mode="json")})
        return
    echo_line(f"reconciled {proposal.proposal_id} as {finding} by {approver_id}")
    echo_line(f"  resume it to continue the agent's thread: supervisor resume {proposal_id}")
