"""Deciding one call: the strongest verdict of the rules that match, else the tool's default.

Rules naming exact tools are indexed by tool name, so a call only looks at the rules about its
own tool plus the glob rules; a rule set of a thousand rules costs a call a handful of checks.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from supervisor.rules.condition import Condition
from supervisor.rules.model import STRENGTH, CallFacts, Rule, Verdict

_GLOB = frozenset("*?[")


@dataclass(frozen=True)
class Decision:
    """The verdict for a call, the rule that gave it (``None``: the tool's default) and why."""

    verdict: Verdict
    rule: str | None
    reason: str

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

    def matches(self, call: CallFacts) -> bool:
        if not self.rule.match.holds(call):
            return False
        if self.condition is None:
            return True
        holds = self.condition.holds(call.activation())
        if holds is None:  # cannot be evaluated: fail safe (see condition.py)
            return self.rule.verdict != "allow"
        return holds


class RuleSet:
    """Compiled rules, ready to decide calls."""

    def __init__(self, rules: list[Rule], conditions: dict[str, Condition]) -> None:
        self.rules = tuple(rules)
        self._by_tool: dict[str, list[_Compiled]] = defaultdict(list)
        self._everywhere: list[_Compiled] = []
        for order, rule in enumerate(rules):
            compiled = _Compiled(order, rule, conditions.get(rule.name))
            tools = rule.match.tools
            if tools and not any(_GLOB & set(pattern) for pattern in tools):
                for tool in tools:
                    self._by_tool[tool].append(compiled)
            else:
                self._everywhere.append(compiled)

    def __len__(self) -> int:
        return len(self.rules)

    def evaluate(self, call: CallFacts) -> Decision:
        """The decision for ``call``: deny beats ask beats allow, the first rule in file order
        breaks a tie, and with no rule matching the tool's default
        (:func:`default_decision`)."""
        candidates = [*self._by_tool.get(call.tool, ()), *self._everywhere]
        if self._by_tool.get(call.tool) and self._everywhere:
            candidates.sort(key=lambda compiled: compiled.order)
        best: _Compiled | None = None
        for compiled in candidates:
            if best is not None and STRENGTH[compiled.rule.verdict] <= STRENGTH[best.rule.verdict]:
                continue  # a later rule that is not stronger cannot win
            if compiled.matches(call):
                best = compiled
                if compiled.rule.verdict == "deny":
                    break  # nothing is stronger, and it is the first deny that matches
        if best is None:
            return default_decision(call)
        return Decision(best.rule.verdict, best.rule.name, best.rule.reason)
