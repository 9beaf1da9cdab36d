"""``supervisor doctor``: can this machine isolate code, and is the ledger reachable?"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from sandboxes.isolation import Check


@click.command()
@click.option("--db", "db_url", default=None, help="Ledger URL to check (default: SUPERVISOR_DB).")
def doctor(db_url: str | None) -> None:
    """Check bubblewrap, namespaces, rlimits, cgroup pids, Chromium and the ledger.

    Prints one OK/FAIL line per check with how to fix each failure; exits 1 when the local
    sandbox cannot run (it then refuses every run rather than run code unconfined).
    """
    from sandboxes.isolation import cgroup_check, chromium_check, isolation_checks

    checks: list[Check] = [*isolation_checks(), cgroup_check(), chromium_check(), _ledger(db_url)]
    for check in checks:
        mark = "OK  " if check.ok else ("FAIL" if check.required else "WARN")
        click.echo(f"{mark} {check.name:<18} {check.detail}")
        if not check.ok and check.fix:
            click.echo(f"     fix: {check.fix}")
    failed = [check for check in checks if check.required and not check.ok]
    if failed:
        click.echo(
            f"\nThe sandbox cannot run here ({', '.join(c.name for c in failed)}); "
            "it refuses to run code until this is fixed."
        )
        sys.exit(1)
    click.echo("\nThe local sandbox can run.")


def _ledger(db_url: str | None) -> Check:
    from sqlalchemy import make_url

    from sandboxes.isolation import Check
    from supervisor.provider import SQLModelProvider

    provider = SQLModelProvider(db_url)
    shown = make_url(provider.url).render_as_string(hide_password=True)
    try:
        provider.ledger.list_processes()
    except Exception as exc:  # the check reports any failure to open, whatever its type
        return Check("ledger", False, f"{shown}: {exc}"[:300],
                     "Check SUPERVISOR_DB / --db and that the database is reachable.",
                     required=False)  # fmt: skip
    finally:
        provider.close()
    return Check("ledger", True, shown)
