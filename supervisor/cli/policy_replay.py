"""``supervisor policy replay FILE`` and ``supervisor policy suggest``: rules against history.

``replay`` decides every recorded, decided proposal with the rules of FILE and prints, first,
every call a human rejected (or reconciled as failed) that they would allow; it exits 1 when
there is one, so a team's CI can refuse such a change. ``suggest`` writes allow rules for what
operators keep approving, each verified by replay never to allow a rejected call. Both only read
the ledger. Ledger text (ids, tool and agent names, arguments, reasons) is printed escaped.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from supervisor.cli.analysis import since_option
from supervisor.cli.output import echo_json, echo_line
from supervisor.cli.proposals import db_option, open_ledger
from supervisor.errors import SupervisorError

if TYPE_CHECKING:
    from supervisor.rules.replay import DecidedCall, Flagged, ReplayReport
    from supervisor.rules.suggest import Suggestions


class SuggestionsNotWritten(SupervisorError, OSError):
    """``policy suggest --out FILE`` could not write FILE."""

    code = "cannot_write_file"


#: Exit status of ``replay`` when a call a human rejected would be allowed.
EXIT_REJECTED_ALLOWED = 1
_SHOWN_ARGUMENTS = 160
#: Approved-but-denied calls listed in the human form (all of them are in --json).
_SHOWN_DENIED = 20


def load_history(db_url: str | None, since: datetime | None) -> list[DecidedCall]:
    """The decided calls of the ledger (created at or after ``since``), read-only."""
    from supervisor.rules.history import read_history
    from supervisor.rules.replay import decided_calls

    with open_ledger(db_url, read_only=True) as ledger:
        return decided_calls(read_history(ledger.repository, since=since))


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else "-"


def _arguments(arguments: dict[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= _SHOWN_ARGUMENTS else text[: _SHOWN_ARGUMENTS - 3] + "..."


def _flag_lines(flag: Flagged) -> list[str]:
    decided = f'rule "{flag.rule}"' if flag.rule else "the tool's default"
    human = {"rejected": "rejected", "reconciled_failed": "reconciled as failed",
             "edited": "edited before approving", "approved": "approved"}[flag.flag]  # fmt: skip
    said = f": {flag.reason}" if flag.reason else " (no reason given)"
    return [
        f"  {flag.proposal_id}  {flag.tool}  agent {flag.agent}  {_when(flag.at)}",
        f"    {flag.verdict} by {decided}; {human} by {flag.by or '?'}{said}",
        f"    arguments {_arguments(flag.arguments)}",
    ]


def report_lines(report: ReplayReport, source: str) -> list[str]:
    """The human form of a replay: the rejected-but-allowed calls first, then the rest."""
    lines: list[str] = []
    if report.rejected_allowed:
        lines.append(
            f"!! {len(report.rejected_allowed)} call(s) a human REJECTED (or reconciled as "
            f"failed) would be ALLOWED by {source}:"
        )
        for flag in report.rejected_allowed:
            lines += _flag_lines(flag)
        lines.append("")
    if report.edited_allowed:
        lines.append(f"{len(report.edited_allowed)} call(s) a human edited before approving "
                     "would be allowed as the model proposed them:")  # fmt: skip
        for flag in report.edited_allowed:
            lines += _flag_lines(flag)
        lines.append("")
    if report.approved_denied:
        lines.append(f"{len(report.approved_denied)} call(s) a human approved would be denied:")
        for flag in report.approved_denied[:_SHOWN_DENIED]:
            lines += _flag_lines(flag)
        if len(report.approved_denied) > _SHOWN_DENIED:
            more = len(report.approved_denied) - _SHOWN_DENIED
            lines.append(f"  ... and {more} more (--json lists them all)")
        lines.append("")
    human, verdicts = report.human, report.verdicts
    lines += [
        f"Replayed {report.replayed} decided calls ({_when(report.first_at)} to "
        f"{_when(report.last_at)}) with {source}",
        f"  candidate: {verdicts['allow']} allow, {verdicts['ask']} ask, {verdicts['deny']} deny",
        f"  humans: {human['approved']} approved ({human['edited']} edited, "
        f"{human['reconciled_failed']} reconciled as failed), {human['rejected']} rejected, "
        f"{human['undecided']} expired or cancelled; {human['by_rule']} decided by rules",
        f"  prompts: {report.prompts} answered by a human; {report.prompts_saved} saved "
        f"({report.saved_share:.0%})",
    ]
    lines += [f'  rule "{name}": decides {counts["decided"]}, saves {counts["prompts_saved"]}'
              for name, counts in report.rules.items()]  # fmt: skip
    if report.safe:
        lines.append("OK: no call a human rejected would be allowed.")
    else:
        lines.append(f"FAIL: {len(report.rejected_allowed)} rejected call(s) would be allowed.")
    return lines


@click.command("replay")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--since", default=None, help="Only proposals since: ISO-8601 time or 30m, 2h, 7d.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option(
    "--tui",
    "on_screen",
    is_flag=True,
    help="Show the report in the terminal UI, with the verdict mix plotted over time.",
)
@db_option
def replay_command(
    file: Path, since: str | None, as_json: bool, on_screen: bool, db_url: str | None
) -> None:
    """Decide the ledger's recorded proposals with the rules in FILE, before applying them.

    Prints first every call a human rejected (or reconciled as failed) that FILE would allow,
    then calls a human edited or approved that it would allow unedited or deny, and the counts:
    allow / ask / deny, and the prompts it would have saved. Exits 1 when a rejected call would
    be allowed (for CI), 0 otherwise. Reads the ledger only.
    """
    from supervisor.rules.loader import load_rules
    from supervisor.rules.replay import replay

    rules = load_rules(file)
    start = since_option(since)
    report = replay(rules, load_history(db_url, start))
    if on_screen:
        from supervisor.cli.tui import open_replay

        open_replay(report, str(file))
    elif as_json:
        echo_json({"policy": str(file), "since": start.isoformat() if start else None,
                   **report.to_json()})  # fmt: skip
    else:
        for line in report_lines(report, str(file)):
            echo_line(line)
    if not report.safe:
        raise SystemExit(EXIT_REJECTED_ALLOWED)


def _visible(text: str) -> str:
    from supervisor.services.rendering import visible_escapes

    return "\n".join(visible_escapes(line) for line in text.split("\n"))


def _suggestions_json(result: Suggestions, toml_text: str) -> dict[str, Any]:
    return {
        "min_approvals": result.min_approvals,
        "rules": [
            {"name": s.name, "tool": s.tool, "agents": list(s.agents), "when": s.when(),
             "covered": len(s.covered), "prompts_saved": s.prompts_saved, "keeps": s.describe()}
            for s in result.suggestions
        ],
        "dropped": result.dropped, "replay": result.report.to_json(), "toml": toml_text,
    }  # fmt: skip


@click.command("suggest")
@click.option("--since", default=None, help="Only proposals since: ISO-8601 time or 30m, 2h, 7d.")
@click.option("--min-approvals", type=click.IntRange(min=1), default=None,
              help="Fewest approved calls a rule must cover (default 5).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write the TOML here.")
@db_option
def suggest_command(
    since: str | None, min_approvals: int | None, as_json: bool, out: Path | None,
    db_url: str | None,
) -> None:  # fmt: skip
    """Suggest allow rules for the calls operators keep approving.

    Each rule names one tool and the agents that were approved; arguments that stayed the same
    stay exact, numbers become the approved range, paths their directories, URLs their
    origins, identifiers their shape, and anything else one of the values approved twice. No
    suggestion allows a call a human rejected, reconciled as failed or edited: each is narrowed
    or dropped until replaying the whole set over the history allows none. The output is a
    policy file (TOML, with examples from the history) for `policy test` and `policy apply`.
    """
    from supervisor.rules.suggest import DEFAULT_MIN_APPROVALS, suggest
    from supervisor.rules.suggest_toml import suggestions_toml

    start = since_option(since)
    history = load_history(db_url, start)
    result = suggest(history, min_approvals=min_approvals or DEFAULT_MIN_APPROVALS)
    toml_text = _visible(suggestions_toml(result))
    if out is not None:
        try:
            out.write_text(toml_text, encoding="utf-8")
        except OSError as error:
            raise SuggestionsNotWritten(
                f"cannot write {out} ({error.strerror or error})",
                hint="Pass --out a writable path, or leave it out to print the rules.",
            ) from None
    if as_json:
        echo_json(_suggestions_json(result, toml_text))
    elif out is None:
        click.echo(toml_text, nl=False)
    else:
        report = result.report
        echo_line(f"Wrote {len(result.suggestions)} rule(s) to {out}: they save "
                  f"{report.prompts_saved} of {report.prompts} prompts "
                  f"({report.saved_share:.0%}) and allow {len(report.rejected_allowed)} "
                  "call(s) a human rejected.")  # fmt: skip
        for suggestion in result.suggestions:
            echo_line(f'  "{suggestion.name}": saves {suggestion.prompts_saved} prompts')
        echo_line(f"Check it with `supervisor policy test {out}` and "
                  f"`supervisor policy replay {out}`.")  # fmt: skip
