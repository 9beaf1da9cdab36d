"""``supervisor doctor``: can this machine isolate code, and is the ledger reachable?

Doctor also tidies what dead runs left behind: live process rows whose heartbeat stopped are
marked ``lost`` and sandbox work directories whose owner is gone are removed (the same steps
every sandbox run takes first). It never creates a ledger: a missing one is reported.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from sandboxes.isolation import Check


@click.command()
@click.option(
    "--db", "db_url", metavar="URL", default=None,
    help="Ledger URL or SQLite path to check (default: SUPERVISOR_DB or the user's ledger).",
)  # fmt: skip
def doctor(db_url: str | None) -> None:
    """Check bubblewrap, namespaces, seccomp, rlimits, cgroup pids, Chromium and the ledger.

    Prints one OK/FAIL line per check with how to fix each failure; exits 1 when the local
    sandbox cannot run (it then refuses every run rather than run code unconfined).
    """
    url = _checked_url(db_url)  # before anything is probed or written
    from sandboxes import workdirs
    from sandboxes.isolation import Check, cgroup_check, chromium_check, isolation_checks

    checks: list[Check] = [*isolation_checks(), cgroup_check(), chromium_check(), *_ledger(url)]
    removed = workdirs.sweep()
    detail = f"removed {len(removed)} left by dead runs" if removed else "none left by dead runs"
    checks.append(Check("sandbox workdirs", True, detail, required=False))
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


def _checked_url(db_url: str | None) -> str:
    """The ledger URL doctor checks: ``--db`` is a path or a URL, as for every other command.

    Raises:
        UnsupportedLedgerUrl: It is not a URL of a ledger engine (sqlite, postgresql).
        LedgerPathInvalid: A SQLite path the filesystem refuses (too long, unknown ``~user``).
    """
    from supervisor.cli.proposals import ledger_url
    from supervisor.store.urls import checked_sqlite_path, resolve_url, supported_url

    url = resolve_url(ledger_url(db_url))
    checked_sqlite_path(supported_url(url))
    return url


def _ledger(url: str) -> list[Check]:
    from sqlalchemy import make_url

    from sandboxes.isolation import Check
    from supervisor.ledger.errors import LedgerError
    from supervisor.store.engine import sqlite_path
    from supervisor.store.provider import SQLModelProvider

    shown = make_url(url).render_as_string(hide_password=True)
    fix = "Check SUPERVISOR_DB / --db and that the database is reachable."
    path = sqlite_path(url)
    if path is not None and not path.exists():
        return [Check("ledger", False, f"{shown}: no ledger there (doctor does not create one)",
                      fix, required=False)]  # fmt: skip
    try:
        provider = SQLModelProvider(url, must_exist=True)
    except Exception as exc:  # the check reports any failure to open, whatever its type
        return [Check("ledger", False, f"{shown}: {exc}"[:300], fix, required=False)]
    try:
        provider.ledger.list_processes()
    except Exception as exc:  # the check reports any failure to open, whatever its type
        provider.close()
        return [Check("ledger", False, f"{shown}: {exc}"[:300], fix, required=False)]
    try:
        lost = provider.ledger.mark_lost_processes()
    except LedgerError as exc:  # e.g. a read-only ledger: it can still be checked
        return [Check("ledger", True, shown),
                Check("stale processes", False, f"not marked: {exc.message}"[:300],
                      "Run doctor where the ledger is writable.", required=False)]  # fmt: skip
    finally:
        provider.close()
    stale = f"marked {len(lost)} lost (lease ran out)" if lost else "none whose lease ran out"
    return [Check("ledger", True, shown), Check("stale processes", True, stale, required=False)]
