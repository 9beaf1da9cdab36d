"""The suggested rules as a policy file: ``[[rules]]`` that ``policy test``/``apply`` read.

Each rule is preceded by comments with its replay preview (prompts it saves) and what it keeps
of each argument, so the operator reviewing the file sees what widens; the file's own examples
(approved calls expected ``allow``, rejected ones ``ask``) make ``policy test`` a check of it.
"""

from __future__ import annotations

from typing import Any

from supervisor.rules.literals import comment, toml_key, toml_string, toml_value
from supervisor.rules.suggest import Suggestions

_RULE_ORDER = ("name", "verdict", "reason", "tool", "agents", "target", "args", "when")


def _rule_lines(table: dict[str, Any]) -> list[str]:
    lines = ["[[rules]]"]
    for key in _RULE_ORDER:
        if key in table:
            value = table[key]
            text = toml_string(value) if key == "when" else toml_value(value)
            lines.append(f"{key} = {text}")
    for example in table.get("examples", []):
        lines += ["", "[[rules.examples]]"]
        lines += [f"{toml_key(key)} = {toml_value(value)}" for key, value in example.items()]
    return lines


def suggestions_toml(result: Suggestions, *, source: str = "the ledger") -> str:
    """The policy file for ``result`` (header, then one commented ``[[rules]]`` per rule)."""
    report = result.report
    lines = [
        comment(f"Suggested by `supervisor policy suggest` from {report.replayed} decided calls "
                f"in {source} (rules covering at least {result.min_approvals} approved calls)."),
        comment("Review every rule before `supervisor policy apply`: each allows calls without "
                "asking."),
        comment(f"Replay: saves {report.prompts_saved} of {report.prompts} prompts "
                f"({report.saved_share:.0%}); allows {len(report.rejected_allowed)} calls a "
                "human rejected."),
    ]  # fmt: skip
    if not result.suggestions:
        lines.append(comment("No rule to suggest: nothing was approved often enough."))
    for reason in result.dropped:
        lines.append(comment(f"not suggested: {reason}"))
    for suggestion in result.suggestions:
        lines += [
            "",
            comment(f"{suggestion.name}: saves {suggestion.prompts_saved} prompts "
                    f"({len(suggestion.covered)} approved calls covered)"),
        ]  # fmt: skip
        lines += [comment(f"  {line}") for line in suggestion.describe()]
        lines += _rule_lines(suggestion.table())
    return "\n".join(lines) + "\n"
