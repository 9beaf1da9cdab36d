"""``supervisor policy``: show, list and apply the approval policy stored in the ledger.

The ledger holds one policy for every process that opens it (SDK, CLI, TUI, MCP); changing it
is an audited act recorded with the OS identity (``user@host``) of whoever ran ``apply``.
Errors (an unreadable or invalid file, an unusable stored policy) print one line and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from supervisor.cli.batch import batch
from supervisor.cli.output import echo_line
from supervisor.cli.policy_doc import diff_lines, policy_diff, policy_toml
from supervisor.cli.policy_replay import replay_command, suggest_command
from supervisor.cli.proposals import db_option, open_ledger
from supervisor.ledger.errors import PolicyInvalid
from supervisor.ledger.policy import ApprovalPolicy, PolicyVersion


def _echo(text: str) -> None:
    """One human-facing line per line of ``text``, with invisible characters escaped."""
    for line in text.split("\n"):
        echo_line(line)


def _json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=True))


def _version_json(version: PolicyVersion) -> dict[str, Any]:
    data: dict[str, Any] = version.model_dump(mode="json")
    return data


def _summary(version: PolicyVersion) -> str:
    reason = f"  {version.reason}" if version.reason else ""
    return (
        f"v{version.version}  {version.applied_at.isoformat(timespec='seconds')}  "
        f"{version.applied_by}  {version.document_hash[:12]}{reason}"
    )


@click.group()
def policy() -> None:
    """Show, list and apply the ledger's approval policy (enforced by every process)."""


policy.add_command(batch)
policy.add_command(replay_command)
policy.add_command(suggest_command)


@policy.command("show")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@db_option
def show(as_json: bool, db_url: str | None) -> None:
    """Show the policy in force (as TOML that `policy apply` accepts)."""
    with open_ledger(db_url, read_only=True) as ledger:
        stored = ledger.current_policy()
        if not as_json:
            ledger.policy  # noqa: B018 - a stored document that fails its hash is an error here
    if as_json:
        _json(_version_json(stored) if stored else {"version": 0, "document": None})
        return
    if stored is None:
        click.echo("No approval policy stored: any approver may approve any proposal.")
        click.echo("Set one with `supervisor policy apply FILE`.")
        return
    text = policy_toml(stored.policy)
    _echo(f"# approval policy {_summary(stored)}\n{text}")


@policy.command("history")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@db_option
def history(as_json: bool, db_url: str | None) -> None:
    """List every stored version, oldest first: when, by whom, hash and reason."""
    with open_ledger(db_url, read_only=True) as ledger:
        versions = ledger.policy_history()
    if as_json:
        _json({"versions": [_version_json(version) for version in versions]})
        return
    if not versions:
        click.echo("No approval policy stored.")
        return
    for version in versions:
        _echo(_summary(version))


def read_policy_file(path: Path) -> ApprovalPolicy:
    """The policy in a TOML file.

    Raises:
        PolicyInvalid: The file cannot be read, is not UTF-8 TOML, or is not a policy.
    """
    source = str(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as error:
        raise PolicyInvalid(
            f"cannot read the file ({error.strerror or error})", source=source,
            hint="Pass the path of a TOML file with an [approval] table.",
        ) from None  # fmt: skip
    except UnicodeDecodeError:
        raise PolicyInvalid("the file is not UTF-8 text", source=source) from None
    return ApprovalPolicy.from_toml(text, source=source)


def _replayed_before_apply(ledger: Any, candidate: ApprovalPolicy, source: str, yes: bool) -> None:
    """Replay FILE's rules over the ledger's history and say what they would have done; when
    they would have allowed a call a human rejected, ask (or, without a terminal and without
    ``--yes``, refuse) before anything is applied."""
    from supervisor.cli.policy_replay import report_lines
    from supervisor.rules.history import read_history
    from supervisor.rules.replay import decided_calls, replay

    report = replay(candidate.ruleset, decided_calls(read_history(ledger.repository)))
    lines = report_lines(report, source)
    if report.safe:  # the summary only: the counts and the verdict line
        lines = lines[lines.index(next(line for line in lines if line.startswith("Replayed"))) :]
    for line in lines:
        echo_line(line)
    if report.safe or yes:
        return
    if not click.get_text_stream("stdin").isatty():
        raise SystemExit(
            f"Not applied: {len(report.rejected_allowed)} call(s) a human rejected would be "
            "allowed. Fix the rules, or pass --yes to apply anyway."
        )
    if not click.confirm("Apply it anyway?", default=False):
        raise SystemExit("Not applied.")


@policy.command("apply")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--reason", default=None, help="Why (stored and audited).")
@click.option(
    "--yes",
    is_flag=True,
    help="Apply even if the replay finds rejected calls the rules would allow.",
)
@db_option
def apply(file: Path, reason: str | None, yes: bool, db_url: str | None) -> None:
    """Make the policy in FILE (TOML) the ledger's policy, for every process.

    FILE has an [approval] table and [[rules]] (docs/policy.md). With rules, the ledger's
    recorded proposals are replayed first (as `policy replay` does) and the summary printed;
    when the rules would have allowed a call a human rejected, apply asks first (without a
    terminal it refuses unless --yes is given).

    \b
    [approval]
    forbid_self_approval = true
    [approval.approvers_by_domain]
    finance = ["cfo", "cfo@host"]
    """
    new_policy = read_policy_file(file)
    with open_ledger(db_url, must_exist=True) as ledger:  # a policy is for an existing ledger
        stored = ledger.current_policy()
        if new_policy.rules and (
            stored is None or stored.document_hash != new_policy.document_hash
        ):
            _replayed_before_apply(ledger, new_policy, str(file), yes)
        change = ledger.apply_policy(new_policy, reason=reason, via="cli")
    if change.version is None:
        click.echo("Unchanged: the ledger has no policy and this one has no rules.")
    elif not change.changed:
        _echo(f"Unchanged: the ledger already enforces this policy (v{change.version.version}).")
    else:
        _echo(f"Applied approval policy {_summary(change.version)}")


@policy.command("diff")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@db_option
def diff(file: Path, as_json: bool, db_url: str | None) -> None:
    """Show what applying FILE would change, rule by rule; exit 1 when it changes anything."""
    candidate = read_policy_file(file)
    with open_ledger(db_url, read_only=True) as ledger:
        stored = ledger.current_policy()
        in_force = ledger.policy
    changes = policy_diff(in_force, candidate)
    if as_json:
        _json({"version": stored.version if stored else 0, "changes": changes})
    else:
        shown = f"v{stored.version}" if stored else "no stored policy"
        for line in diff_lines(changes) or [f"No change: FILE is the policy in force ({shown})."]:
            _echo(line)
    if changes:
        raise SystemExit(1)


@policy.command("test")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def test(file: Path, as_json: bool) -> None:
    """Check the examples of the rules in FILE; exit 1 when one is decided otherwise.

    Each [[rules.examples]] entry (tool, arguments, expect = allow|ask|deny) is decided by the
    whole rule set, as a call would be, so an example also catches a later rule that overrides
    its own. Usable in a team's CI; nothing is read from or written to a ledger.
    """
    from supervisor.rules.examples import check_examples
    from supervisor.rules.loader import load_rules

    results = check_examples(load_rules(file))
    misses = [result for result in results if not result.ok]
    if as_json:
        _json({
            "examples": len(results), "misses": len(misses),
            "results": [
                {"where": r.example.where, "tool": r.example.call.tool, "expect": r.example.expect,
                 "verdict": r.decision.verdict, "rule": r.decision.rule, "ok": r.ok}
                for r in results
            ],
        })  # fmt: skip
    else:
        for result in misses:
            decided = result.decision.rule or "the tool's default"
            _echo(
                f"MISS {result.example.where}: {result.example.call.tool} expected "
                f"{result.example.expect}, got {result.decision.verdict} (by {decided}: "
                f"{result.decision.reason})"
            )
        _echo(f"{len(results) - len(misses)} of {len(results)} examples hold")
    if misses:
        raise SystemExit(1)
