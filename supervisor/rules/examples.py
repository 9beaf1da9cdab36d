"""``supervisor policy test FILE``: every example a rule carries, against the whole rule set."""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.rules.evaluate import Decision, RuleSet
from supervisor.rules.model import Example


@dataclass(frozen=True)
class ExampleResult:
    """One example and what the rule set decided for it."""

    example: Example
    decision: Decision

    @property
    def ok(self) -> bool:
        return self.decision.verdict == self.example.expect


def check_examples(rules: RuleSet) -> list[ExampleResult]:
    """Decide every example of every rule, in file order."""
    return [
        ExampleResult(example, rules.evaluate(example.call))
        for rule in rules.rules
        for example in rule.examples
    ]
