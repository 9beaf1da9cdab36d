"""``supervisor operators``: the named people who may decide from ``supervisor serve``.

``add NAME`` prints the login token once (only its SHA-256 is stored); ``revoke NAME`` ends
its token and every session of it at once.
"""

from __future__ import annotations

from typing import Any

import click

from supervisor.cli.output import echo_json, echo_line
from supervisor.cli.proposals import db_option, open_ledger
from supervisor.ledger.operator_tokens import Operator


def operator_json(operator: Operator) -> dict[str, Any]:
    data: dict[str, Any] = operator.model_dump(mode="json")
    data["active"] = operator.active
    return data


def _when(value: Any) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "-"


@click.group()
def operators() -> None:
    """Named operators who log in to `supervisor serve`: add, list, revoke."""


@operators.command("add")
@click.argument("name")
@db_option
def add(name: str, db_url: str | None) -> None:
    """Make operator NAME and print its login token (shown this once, stored hashed)."""
    with open_ledger(db_url) as ledger:
        made = ledger.add_operator(name)
    echo_line(f"Operator {made.operator.name} added. Login token (shown once, keep it secret):")
    click.echo(made.token)


@operators.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@db_option
def list_operators(as_json: bool, db_url: str | None) -> None:
    """List operators (revoked ones too) with when they last logged in."""
    with open_ledger(db_url, read_only=True) as ledger:
        found = ledger.operators()
    if as_json:
        echo_json({"operators": [operator_json(operator) for operator in found]})
        return
    if not found:
        echo_line("No operators; add one with `supervisor operators add NAME`.")
        return
    for operator in found:
        state = "active" if operator.active else f"revoked {_when(operator.revoked_at)}"
        echo_line(
            f"{operator.name}  {state}  added {_when(operator.created_at)} by "
            f"{operator.created_by}  last login {_when(operator.last_login_at)}"
        )


@operators.command("revoke")
@click.argument("name")
@db_option
def revoke(name: str, db_url: str | None) -> None:
    """Revoke operator NAME: its token and open sessions stop working at once."""
    with open_ledger(db_url, must_exist=True) as ledger:
        revoked = ledger.revoke_operator(name)
    echo_line(f"Operator {revoked.name} revoked at {_when(revoked.revoked_at)}.")
