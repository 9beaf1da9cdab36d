"""``supervisor grants``: approve a call and allow similar ones for a while; list and revoke.

A grant is made from one pending proposal (``grants add ID``): the proposal is approved and
later calls of the same tool, schema, execution target and agent whose arguments match run
without asking, until the grant expires (default 15 minutes), reaches its use cap or is
revoked. Every call a grant allows is a ledger decision naming it.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from supervisor.cli.output import echo_json, echo_line
from supervisor.cli.proposals import _approver, db_option, full_id, open_ledger
from supervisor.ledger.grants import DEFAULT_GRANT_SECONDS, DEFAULT_GRANT_USES, Grant
from supervisor.ledger.ids import resolve_id
from supervisor.rules.grants import GrantInvalid


def parse_pattern(text: str) -> tuple[str, dict[str, Any]]:
    """``NAME=prefix:/dir/``, ``NAME=origin:https://host``, ``NAME=range:LOW..HIGH``.

    Raises:
        GrantInvalid: Not one of those forms.
    """
    name, sep, spec = text.partition("=")
    kind, colon, value = spec.partition(":")
    if not sep or not colon or not name:
        raise GrantInvalid(f"--allow {text!r} is not NAME=KIND:VALUE")
    if kind == "range":
        low, dots, high = value.partition("..")
        try:
            bounds = [json.loads(low), json.loads(high)] if dots else None
        except ValueError:
            bounds = None
        if bounds is None:
            raise GrantInvalid(f"--allow {text!r}: a range is LOW..HIGH numbers")
        return name, {"range": bounds}
    if kind in ("prefix", "origin"):
        return name, {kind: value}
    raise GrantInvalid(f"--allow {text!r}: KIND is prefix, origin or range")


def grant_json(grant: Grant, now: datetime) -> dict[str, Any]:
    data: dict[str, Any] = grant.model_dump(mode="json")
    data["state"] = grant.state(now)
    return data


def grant_line(grant: Grant, now: datetime) -> str:
    """One line per grant: id, state, uses, tool, agent, patterns, expiry, who made it."""
    patterns = ", ".join(
        f"{name}={kind}:{json.dumps(spec, ensure_ascii=False)}"
        for name, pattern in grant.arguments.items()
        for kind, spec in pattern.items()
    )
    agent = grant.owner or "any agent"
    return (
        f"{grant.grant_id[:12]}  {grant.state(now):<8} {grant.uses}/{grant.max_uses}  "
        f"{grant.tool_name}  {agent}  {{{patterns}}}  until "
        f"{grant.expires_at.isoformat(timespec='seconds')}  by {grant.approver_id}"
    )


@click.group()
def grants() -> None:
    """Approve a call and allow similar ones for a while; list and revoke grants."""


@grants.command("add")
@click.argument("proposal_id")
@click.option("--allow", "allows", multiple=True, metavar="NAME=KIND:VALUE",
              help="Widen one argument: prefix:/dir/, origin:https://host or range:LOW..HIGH "
              "(repeatable; every other argument stays exact).")  # fmt: skip
@click.option("--minutes", type=float, default=DEFAULT_GRANT_SECONDS / 60, show_default=True)
@click.option("--uses", type=int, default=DEFAULT_GRANT_USES, show_default=True)
@click.option("--any-agent", is_flag=True, help="Also for calls of other agents.")
@click.option("--reason", default=None, help="Why (audited, shown on every call it allows).")
@click.option("--approver", default=None, help="Approver id (default: OS user@host).")
@click.option("--json", "as_json", is_flag=True, help="Print the grant as JSON.")
@db_option
def add(
    proposal_id: str, allows: tuple[str, ...], minutes: float, uses: int, any_agent: bool,
    reason: str | None, approver: str | None, as_json: bool, db_url: str | None,
) -> None:  # fmt: skip
    """Approve PROPOSAL_ID and allow similar calls (same tool, schema, target, agent)."""
    patterns = dict(parse_pattern(text) for text in allows)
    approver_id, _ = _approver(approver)
    with open_ledger(db_url, must_exist=True) as ledger:
        _, grant = ledger.approve_similar(
            full_id(ledger, proposal_id), approver_id, patterns=patterns,
            seconds=minutes * 60, max_uses=uses, any_agent=any_agent, reason=reason, via="cli",
        )  # fmt: skip
        now = ledger.clock.now()
    if as_json:
        echo_json(grant_json(grant, now))
        return
    echo_line(f"approved {proposal_id} and granted {grant.grant_id}")
    echo_line(grant_line(grant, now))


@grants.command("list")
@click.option("--all", "show_all", is_flag=True, help="Also expired, used-up and revoked ones.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@db_option
def list_grants(show_all: bool, as_json: bool, db_url: str | None) -> None:
    """List the live grants (newest first)."""
    with open_ledger(db_url, read_only=True) as ledger:
        found = ledger.grants(live_only=not show_all)
        now = ledger.clock.now()
    if not show_all:
        found = [grant for grant in found if grant.state(now) == "active"]
    if as_json:
        echo_json({"grants": [grant_json(grant, now) for grant in found]})
        return
    if not found:
        click.echo("No grants." if show_all else "No live grants (--all shows past ones).")
    for grant in found:
        echo_line(grant_line(grant, now))


@grants.command("revoke")
@click.argument("grant_id")
@click.option("--reason", default="revoked by an operator", help="Why (audited).")
@click.option("--approver", default=None, help="Who (default: OS user@host).")
@db_option
def revoke(grant_id: str, reason: str, approver: str | None, db_url: str | None) -> None:
    """Revoke a grant now: no call recorded after this allows anything by it."""
    approver_id, _ = _approver(approver)
    with open_ledger(db_url, must_exist=True) as ledger:
        grant_id = resolve_id(ledger.repository, "grant", grant_id)
        grant = ledger.revoke_grant(grant_id, approver_id, reason, via="cli")
        now = ledger.clock.now()
    echo_line(f"revoked {grant.grant_id}")
    echo_line(grant_line(grant, now))
