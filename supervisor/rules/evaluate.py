"""Deciding one call: the strongest verdict of the rules that match, else the tool's default.

Rules naming exact tools are indexed by tool name and glob rules by the literal text before
their first wildcard, so a call only looks at the rules that can be about its tool (plus the
few that name no tool); a rule set of a thousand rules costs a call a handful of checks.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from supervisor.rules.condition import Condition
from supervisor.rules.model import CallFacts, Rule, Verdict

_GLOB = frozenset("*?[")
_CACHED_TOOLS = 4096


def _literal_prefix(pattern: str) -> str:
    """The text of a glob before its first wildcard (all of it for an exact name)."""
    for index, char in enumerate(pattern):
        if char in _GLOB:
            return pattern[:index]
    return pattern


@dataclass(frozen=True)
class Decision:
    """The verdict for a call, the rule that gave it (``None``: the tool's default) and why."""

    verdict: Verdict
    rule: str | None
    reason: str
    approvals: int = 1

    @property
    def by_rule(self) -> bool:
        return self.rule is not None


def default_decision(call: CallFacts) -> Decision:
    """No rule matched: read-only deterministic tools run, everything else asks a human."""
    if call.read_only:
        return Decision("allow", None, "read-only tool (no rule matched)")
    return Decision("ask", None, "side effects or approval required (no rule matched)")


@dataclass(frozen=True)
class _Compiled:
    order: int
    rule: Rule
    condition: Condition | None
    strength: tuple[int, int] = (0, 1)

    def matches(self, call: CallFacts, activation: list[dict[str, Any]]) -> bool:
        """``activation`` holds the call's CEL variables once built (shared by the rules)."""
        if not self.rule.match.holds(call):
            return False
        if self.condition is None:
            return True
        if not activation:
            activation.append(call.activation())
        holds = self.condition.holds(activation[0])
        if holds is None:  # cannot be evaluated: fail safe (see condition.py)
            return self.rule.verdict != "allow"
        return holds


class RuleSet:
    """Compiled rules, ready to decide calls."""

    def __init__(self, rules: list[Rule], conditions: dict[str, Condition]) -> None:
        self.rules = tuple(rules)
        self._by_tool: dict[str, list[_Compiled]] = defaultdict(list)
        # Glob rules by the literal text before their first wildcard ("crm." for "crm.*"),
        # per prefix length, so a call only meets the globs that can match its tool.
        self._by_prefix: dict[int, dict[str, list[_Compiled]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self._everywhere: list[_Compiled] = []
        self._by_name: dict[str, tuple[_Compiled, ...]] = {}
        for order, rule in enumerate(rules):
            compiled = _Compiled(order, rule, conditions.get(rule.name), rule.strength)
            tools = rule.match.tools
            prefixes = [_literal_prefix(pattern) for pattern in tools]
            if not tools or not all(prefixes):
                self._everywhere.append(compiled)
                continue
            for pattern, prefix in zip(tools, prefixes, strict=True):
                if prefix == pattern:
                    self._by_tool[pattern].append(compiled)
                else:
                    self._by_prefix[len(prefix)][prefix].append(compiled)

    def __len__(self) -> int:
        return len(self.rules)

    def evaluate(self, call: CallFacts) -> Decision:
        """The decision for ``call``: deny beats ask beats allow (an ask needing more approvers
        beats one needing fewer), the first rule in file order breaks a tie, and with no rule
        matching the tool's default (:func:`default_decision`)."""
        activation: list[dict[str, Any]] = []
        for compiled in self._candidates(call.tool):  # strongest first, then file order
            if compiled.matches(call, activation):
                rule = compiled.rule
                return Decision(rule.verdict, rule.name, rule.reason, rule.approvals)
        return default_decision(call)

    def _candidates(self, tool: str) -> tuple[_Compiled, ...]:
        """The rules that can be about ``tool``, strongest first and in file order among equals,
        so the first that matches is the decision. Kept per tool name (a bounded cache)."""
        cached = self._by_name.get(tool)
        if cached is not None:
            return cached
        found = {compiled.order: compiled for compiled in self._by_tool.get(tool, ())}
        for length, buckets in self._by_prefix.items():
            for compiled in buckets.get(tool[:length], ()):
                found[compiled.order] = compiled
        for compiled in self._everywhere:
            found[compiled.order] = compiled
        ordered = tuple(sorted(found.values(), key=lambda c: (-c.strength[0], -c.strength[1],
                                                              c.order)))  # fmt: skip
        if len(self._by_name) >= _CACHED_TOOLS:
            self._by_name.clear()
        self._by_name[tool] = ordered
        return ordered
