"""Suggestions from history: allow rules for the calls operators keep approving.

Approved calls are grouped by tool and argument names. For each group the values humans
approved are turned into the narrowest safe constraints (:mod:`supervisor.rules.constraints`):
constant arguments stay exact, numbers become their approved range, paths their directories,
URLs their origins, identifiers their shape; everything else stays one of the values approved
at least twice. The agents are pinned to the ones that were approved, the argument names to the
group's (``size(args) == n``), constant execution-target keys to their value.

A suggestion must never allow a call a human rejected, reconciled as failed or edited before
approving. Each candidate is checked against those calls and narrowed (a range split below the
rejected amount, a directory or origin removed, a value dropped) until none matches, or
dropped when fewer than ``min_approvals`` approved calls remain. Then the whole suggested rule
set is replayed over the history with the real evaluator, and any rule a flagged call names is
dropped, until the replay is clean.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from supervisor.rules.constraints import Constraint, OneOf, Prefixes, Range, learn
from supervisor.rules.literals import cel_field, has_null
from supervisor.rules.loader import rules_from_document
from supervisor.rules.replay import DecidedCall, ReplayReport, replay

#: Suggest a rule only when it covers at least this many approved calls.
DEFAULT_MIN_APPROVALS = 5
_NARROWING_STEPS = 200


def glob_literal(name: str) -> str:
    """``name`` as an ``fnmatch`` pattern matching only itself (``*?[`` in brackets)."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in name)


@dataclass
class Suggestion:
    """One suggested allow rule, what it covers, and the calls that pin it down."""

    name: str
    tool: str
    agents: tuple[str, ...]
    arguments: dict[str, Constraint]
    target_exact: dict[str, Any]
    target: dict[str, Constraint]
    open_target: tuple[str, ...]
    covered: list[DecidedCall]
    excluded: list[DecidedCall]
    prompts_saved: int = 0

    @property
    def approvers(self) -> tuple[str, ...]:
        return tuple(sorted({c.final.approver_id or "?" for c in self.covered}))

    @property
    def first_at(self) -> datetime:
        return min(call.call.created_at for call in self.covered)

    @property
    def last_at(self) -> datetime:
        return max(call.call.created_at for call in self.covered)

    def _value_sets(self) -> dict[str, list[Any]]:
        """The arguments kept to exact values, as the rule's ``args`` match (a set lookup
        before any CEL runs); one holding a null (TOML has none) stays in the condition."""
        sets = {}
        for key, constraint in self.arguments.items():
            if isinstance(constraint, OneOf):
                values = [json.loads(text) for text in constraint.values]
                if not has_null(values):
                    sets[key] = values
        return sets

    def when(self) -> str:
        exact = self._value_sets()
        parts = [f"size(args) == {len(self.arguments)}"]
        parts += [c.cel(cel_field("args", key)) for key, c in self.arguments.items()
                  if key not in exact]  # fmt: skip
        parts += [c.cel(cel_field("target", key)) for key, c in self.target.items()]
        return " && ".join(parts)

    def describe(self) -> list[str]:
        """What the rule keeps of each argument, for the operator reviewing it."""
        lines = [f"args.{key}: {c.describe()}" for key, c in self.arguments.items()]
        lines += [f"target.{key}: {c.describe()}" for key, c in self.target.items()]
        lines += [f"target.{key}: any (varies; set by the boundary)" for key in self.open_target]
        return lines

    def reason(self) -> str:
        approvers = ", ".join(self.approvers[:3]) + (
            " and others" if len(self.approvers) > 3 else ""
        )
        return (
            f"Approved {len(self.covered)} times by {approvers} "
            f"({self.first_at:%Y-%m-%d} to {self.last_at:%Y-%m-%d}); no call it allows was "
            "rejected (suggested by supervisor policy suggest)"
        )

    def table(self) -> dict[str, Any]:
        """The ``[[rules]]`` table, with examples taken from the history."""
        table: dict[str, Any] = {
            "name": self.name, "verdict": "allow", "reason": self.reason(),
            "tool": glob_literal(self.tool), "agents": [glob_literal(a) for a in self.agents],
        }  # fmt: skip
        if self.target_exact:
            table["target"] = self.target_exact
        if exact := self._value_sets():
            table["args"] = exact
        table["when"] = self.when()
        examples = [_example(call, "allow") for call in _distinct(self.covered)[:2]]
        examples += [_example(call, "ask") for call in _distinct(self.excluded)[:2]]
        table["examples"] = [example for example in examples if example is not None]
        return table


def _distinct(calls: list[DecidedCall]) -> list[DecidedCall]:
    seen: dict[tuple[str, ...], DecidedCall] = {}
    for call in calls:
        seen.setdefault(call.call.key[:4], call)
    return list(seen.values())


def _example(call: DecidedCall, expect: str) -> dict[str, Any] | None:
    facts = call.call.facts()
    example = {"tool": facts.tool, "arguments": facts.arguments, "agent": facts.agent,
               "target": facts.target, "expect": expect}  # fmt: skip
    if not facts.target:
        del example["target"]
    return None if has_null(example) else example


@dataclass
class Suggestions:
    """The suggested rules, the replay of all of them over the history, and what was dropped."""

    suggestions: list[Suggestion]
    report: ReplayReport
    dropped: list[str] = field(default_factory=list)
    min_approvals: int = DEFAULT_MIN_APPROVALS

    def document(self) -> dict[str, Any]:
        return {"rules": [suggestion.table() for suggestion in self.suggestions]}


def _approved(call: DecidedCall) -> bool:
    return call.outcome == "approved" and not call.bad


def _shared_keys(dicts: list[dict[str, Any]]) -> list[str]:
    keys = set(dicts[0])
    for item in dicts[1:]:
        keys &= set(item)
    return sorted(keys)


class _Group:
    """The approved calls of one tool with one set of argument names, and its constraints."""

    def __init__(self, tool: str, calls: list[DecidedCall]) -> None:
        self.tool = tool
        self.calls = calls
        self.args = [call.call.arguments() for call in calls]
        self.targets = [call.call.facts().target for call in calls]
        self.agents = tuple(sorted({call.call.agent for call in calls}))
        self.keys = sorted(self.args[0])
        self.arguments: dict[str, Constraint] = {}
        self.target_exact: dict[str, Any] = {}
        self.target: dict[str, Constraint] = {}
        self.open_target: list[str] = []

    def learn(self) -> str | None:
        """Learn every constraint; a reason when some argument cannot be constrained."""
        for key in self.keys:
            constraint = learn([args[key] for args in self.args])
            if constraint is None:
                return f"args.{key} never repeats"
            self.arguments[key] = constraint
        # The boundary sets the target (worker, tab, page): a constant key stays exact, a
        # range or a URL/path prefix is kept, and a key that only repeats past values (a
        # worker id) is left open rather than pinned to workers that no longer run.
        for key in _shared_keys(self.targets) if self.targets else []:
            values = [target[key] for target in self.targets]
            constraint = learn(values)
            if isinstance(constraint, OneOf) and len(constraint.values) == 1:
                if has_null(values[0]):  # TOML has no null: compared in the condition
                    self.target[key] = constraint
                else:
                    self.target_exact[key] = values[0]
            elif isinstance(constraint, Range | Prefixes):
                self.target[key] = constraint
            else:
                self.open_target.append(key)
        return None

    def accepts(self, args: dict[str, Any], target: dict[str, Any], agent: str) -> bool:
        if agent not in self.agents or sorted(args) != self.keys:
            return False
        if any(target.get(key) != value for key, value in self.target_exact.items()):
            return False
        if not all(c.accepts(args[key]) for key, c in self.arguments.items()):
            return False
        return all(key in target and c.accepts(target[key]) for key, c in self.target.items())

    def covered(self) -> list[DecidedCall]:
        return [call for call, args, target in zip(self.calls, self.args, self.targets, strict=True)
                if self.accepts(args, target, call.call.agent)]  # fmt: skip

    def narrow(self, bad: DecidedCall, minimum: int) -> bool:
        """Exclude ``bad`` keeping the most approved calls; False when that leaves too few."""
        args, target = bad.call.arguments(), bad.call.facts().target
        options: list[tuple[str, str, Constraint]] = []
        for key, constraint in self.arguments.items():
            options += [("args", key, c) for c in constraint.narrowed(args[key])]
        for key, constraint in self.target.items():
            options += [("target", key, c) for c in constraint.narrowed(target.get(key))]
        best: tuple[int, str, str, Constraint] | None = None
        for where, key, replacement in options:
            table = self.arguments if where == "args" else self.target
            before = table[key]
            table[key] = replacement
            if not self.accepts(args, target, bad.call.agent):
                count = len(self.covered())
                if best is None or count > best[0]:
                    best = (count, where, key, replacement)
            table[key] = before
        if best is None or best[0] < minimum:
            return False
        (self.arguments if best[1] == "args" else self.target)[best[2]] = best[3]
        return True


def _candidate(
    group: _Group, bad: list[DecidedCall], minimum: int, drop: Callable[[str], None]
) -> Suggestion | None:
    label = f"{group.tool} ({', '.join(group.keys) or 'no arguments'})"
    problem = group.learn()
    if problem is not None:
        drop(f"{label}: {problem}")
        return None
    excluded: list[DecidedCall] = []
    for _ in range(_NARROWING_STEPS):
        matched = [c for c in bad if group.accepts(c.call.arguments(), c.call.facts().target,
                                                  c.call.agent)]  # fmt: skip
        if not matched:
            break
        if not group.narrow(matched[0], minimum):
            drop(f"{label}: cannot exclude rejected call {matched[0].final.proposal_id}")
            return None
        excluded.append(matched[0])
    else:
        drop(f"{label}: too many rejected calls to exclude")
        return None
    covered = group.covered()
    if len(covered) < minimum:
        drop(f"{label}: covers only {len(covered)} approved calls (fewer than {minimum})")
        return None
    near = [c for c in bad if c not in excluded and c.call.agent in group.agents]
    return Suggestion(
        name="", tool=group.tool, agents=group.agents, arguments=group.arguments,
        target_exact=group.target_exact, target=group.target,
        open_target=tuple(group.open_target), covered=covered, excluded=excluded + near,
    )  # fmt: skip


def suggest(
    history: Iterable[DecidedCall], *, min_approvals: int = DEFAULT_MIN_APPROVALS
) -> Suggestions:
    """Allow rules for what humans keep approving, none allowing a call a human said no to.

    Args:
        history: Decided calls (``replay.decided_calls`` of ``history.read_history``).
        min_approvals: The fewest approved calls a rule must cover.
    """
    calls = list(history)
    minimum = max(1, min_approvals)
    bad_by_tool: dict[str, list[DecidedCall]] = defaultdict(list)
    groups: dict[tuple[str, tuple[str, ...]], list[DecidedCall]] = defaultdict(list)
    for call in calls:
        if call.bad:
            bad_by_tool[call.call.tool].append(call)
        elif _approved(call):
            groups[(call.call.tool, tuple(sorted(call.call.arguments())))].append(call)
    dropped: list[str] = []
    suggestions: list[Suggestion] = []
    for (tool, _keys), members in sorted(groups.items(), key=lambda item: -len(item[1])):
        if len(members) < minimum:
            continue
        found = _candidate(_Group(tool, members), bad_by_tool[tool], minimum, dropped.append)
        if found is not None:
            same_tool = sum(1 for s in suggestions if s.tool == tool)
            found.name = f"suggested: {tool}" + (f" #{same_tool + 1}" if same_tool else "")
            suggestions.append(found)
    return _verified(suggestions, calls, dropped, minimum)


def _verified(
    suggestions: list[Suggestion], calls: list[DecidedCall], dropped: list[str], minimum: int
) -> Suggestions:
    """Replay the whole set with the real evaluator; drop every rule a flagged call names."""
    while True:
        document = {"rules": [suggestion.table() for suggestion in suggestions]}
        report = replay(rules_from_document(document), calls)
        flagged = [*report.rejected_allowed, *report.edited_allowed]
        unsafe = sorted({flag.rule for flag in flagged if flag.rule is not None})
        if not unsafe:
            break
        dropped += [f"{name}: the replay found it allows a rejected call" for name in unsafe]
        suggestions = [s for s in suggestions if s.name not in unsafe]
    for suggestion in suggestions:
        suggestion.prompts_saved = report.rules.get(suggestion.name, {}).get("prompts_saved", 0)
    return Suggestions(suggestions, report, dropped, minimum)
