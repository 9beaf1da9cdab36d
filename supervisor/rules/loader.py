"""Reading rules from the ``[[rules]]`` tables of a policy document (TOML), strictly.

Every key is checked and an unknown one is refused, so a typo never becomes a rule that
silently matches nothing. Errors name the rule (``rules[2] "small refunds"``) and the key.

```toml
[[rules]]
name = "small refunds"
verdict = "allow"                       # allow | ask | deny
reason = "Refunds under 100 are routine"
tool = "refund_card"                    # or a list; globs allowed ("crm.*")
domains = ["billing"]                   # optional: the tool has any of them
agents = ["billing-*"]                  # optional: the proposing agent (globs)
users = ["*@example.com"]               # optional: on whose behalf (globs)
target = { backend = "local" }          # optional: execution-target keys that must be equal
sites = ["shop.example.com"]            # optional: browser actions on (or navigating to) these
args = { currency = ["EUR", "USD"] }    # optional: arguments that must be one of these values
when = "args.amount < 100"              # optional CEL over args, tool, domains, agent, user, target
# approvals = 2                         # ask rules only: a quorum of distinct approvers

[[rules.examples]]                      # checked by `supervisor policy test FILE`
arguments = { order = "A-1", amount = 20 }
expect = "allow"
```
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from supervisor.canonical import normalise
from supervisor.errors import CanonicalJSONError, SupervisorError
from supervisor.rules.condition import Condition
from supervisor.rules.evaluate import RuleSet
from supervisor.rules.model import VERDICTS, CallFacts, Example, Match, Rule, Verdict, value_set

_RULE_KEYS = frozenset(
    {"name", "verdict", "reason", "tool", "domains", "agents", "users", "target", "when",
     "examples", "approvals", "sites", "args"}
)  # fmt: skip
_EXAMPLE_KEYS = frozenset(
    {"tool", "arguments", "domains", "agent", "user", "target", "read_only", "expect"}
)


class RulesInvalid(SupervisorError, ValueError):
    """The ``[[rules]]`` of a policy document are not usable as written."""

    code = "invalid_rules"

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(
            f"{where}: {problem}; nothing was loaded.",
            hint="See docs/policy.md (Rules) for the format of [[rules]] and their examples.",
            where=where,
        )


def _strings(where: str, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise RulesInvalid(where, f"`{key}` must be a string or a list of non-empty strings")
    return tuple(value)


def _table(where: str, key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RulesInvalid(where, f"`{key}` must be a table")
    return value


def _sites(where: str, value: Any) -> tuple[str, ...]:
    """Browser domain patterns, each parsed now so a typo is an error, not a rule that never
    matches."""
    from sandboxes.browser.policy import DomainPattern

    sites = _strings(where, "sites", value)
    for site in sites:
        try:
            DomainPattern.parse(site)
        except ValueError as error:
            raise RulesInvalid(where, f"`sites`: {error}") from None
    return sites


def _args(where: str, value: Any) -> tuple[tuple[str, frozenset[str | tuple[str, str]]], ...]:
    """``args = { name = [value, ...] }``: each listed argument must equal one of its values."""
    table = _table(where, "args", value)
    sets = []
    for key, values in table.items():
        if not isinstance(values, list) or not values:
            raise RulesInvalid(
                where, f"`args.{key}` must be a non-empty list of the values it may take"
            )
        try:
            normalise(values)
        except CanonicalJSONError as error:
            raise RulesInvalid(where, f"`args.{key}`: {error}") from None
        sets.append((key, value_set(values)))
    return tuple(sets)


def _verdict(where: str, key: str, value: Any) -> Verdict:
    for verdict in VERDICTS:
        if value == verdict:
            return verdict
    raise RulesInvalid(where, f"`{key}` must be one of allow, ask, deny (got {value!r})")


def _example(where: str, raw: Any, rule_tools: tuple[str, ...]) -> Example:
    data = _table(where, "examples", raw)
    unknown = sorted(set(data) - _EXAMPLE_KEYS)
    if unknown:
        raise RulesInvalid(where, f"unknown key {unknown[0]!r}")
    literal = [tool for tool in rule_tools if not set("*?[") & set(tool)]
    tool = data.get("tool", literal[0] if len(literal) == 1 else None)
    if not isinstance(tool, str) or not tool:
        raise RulesInvalid(where, "`tool` is required (the rule does not name exactly one tool)")
    read_only = data.get("read_only", False)
    if not isinstance(read_only, bool):
        raise RulesInvalid(where, "`read_only` must be true or false")
    agent, user = data.get("agent", ""), data.get("user")
    if not isinstance(agent, str) or not (user is None or isinstance(user, str)):
        raise RulesInvalid(where, "`agent` and `user` must be strings")
    call = CallFacts(
        tool=tool,
        arguments=_table(where, "arguments", data.get("arguments", {})),
        domains=_strings(where, "domains", data.get("domains", [])),
        agent=agent,
        user=user,
        target=_table(where, "target", data.get("target", {})),
        read_only=read_only,
    )
    return Example(call, _verdict(where, "expect", data.get("expect")), where)


def _rule(index: int, raw: Any) -> tuple[Rule, Condition | None]:
    where = f"rules[{index}]"
    data = _table(where, "rules", raw)
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise RulesInvalid(where, "`name` is required")
    where = f'rules[{index}] "{name}"'
    unknown = sorted(set(data) - _RULE_KEYS)
    if unknown:
        raise RulesInvalid(where, f"unknown key {unknown[0]!r}")
    reason = data.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise RulesInvalid(where, "`reason` is required (it is shown to the operator)")
    match = Match(
        tools=_strings(where, "tool", data.get("tool", [])),
        domains=_strings(where, "domains", data.get("domains", [])),
        agents=_strings(where, "agents", data.get("agents", [])),
        users=_strings(where, "users", data.get("users", [])),
        target=_table(where, "target", data.get("target", {})),
        sites=_sites(where, data.get("sites", [])),
        args=_args(where, data.get("args", {})),
    )
    when = data.get("when")
    if when is not None and (not isinstance(when, str) or not when.strip()):
        raise RulesInvalid(where, "`when` must be a non-empty CEL expression")
    condition = Condition.compile(when, where) if when else None
    raw_examples = data.get("examples", [])
    if not isinstance(raw_examples, list):
        raise RulesInvalid(where, "`examples` must be a list of tables ([[rules.examples]])")
    examples = tuple(
        _example(f"{where} example {number}", example, match.tools)
        for number, example in enumerate(raw_examples, start=1)
    )
    verdict = _verdict(where, "verdict", data.get("verdict"))
    approvals = data.get("approvals", 1)
    if not isinstance(approvals, int) or isinstance(approvals, bool) or not 1 <= approvals <= 9:
        raise RulesInvalid(where, "`approvals` must be a whole number from 1 to 9")
    if approvals > 1 and verdict != "ask":
        raise RulesInvalid(where, '`approvals` (a quorum) only applies to `verdict = "ask"`')
    rule = Rule(name, verdict, reason, match, when, examples, approvals)
    return rule, condition


def rules_from_document(document: dict[str, Any]) -> RuleSet:
    """The compiled rules of a parsed policy document (its ``rules`` array; none is empty).

    Raises:
        RulesInvalid, RuleConditionInvalid: With the rule and key at fault.
    """
    raw = document.get("rules", [])
    if not isinstance(raw, list):
        raise RulesInvalid("rules", "must be an array of tables ([[rules]])")
    rules: list[Rule] = []
    conditions: dict[str, Condition] = {}
    for index, item in enumerate(raw):
        rule, condition = _rule(index, item)
        if any(existing.name == rule.name for existing in rules):
            raise RulesInvalid(f'rules[{index}] "{rule.name}"', "another rule has that name")
        rules.append(rule)
        if condition is not None:
            conditions[rule.name] = condition
    return RuleSet(rules, conditions)


def load_rules(path: Path) -> RuleSet:
    """The rules of the policy file at ``path``.

    Raises:
        RulesInvalid: Unreadable, not TOML, or rules that are not usable.
    """
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise RulesInvalid(str(path), f"cannot be read ({error.strerror or error})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise RulesInvalid(str(path), f"is not a TOML document ({error})") from None
    return rules_from_document(document)
