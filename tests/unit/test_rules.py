"""Policy rules: matching, CEL conditions, precedence, defaults, strict loading, examples."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from supervisor.rules.condition import Condition, RuleConditionInvalid
from supervisor.rules.evaluate import RuleSet
from supervisor.rules.examples import check_examples
from supervisor.rules.loader import RulesInvalid, load_rules, rules_from_document
from supervisor.rules.model import CallFacts


def rules(*tables: dict[str, Any]) -> RuleSet:
    return rules_from_document({"rules": list(tables)})


def rule(name: str, verdict: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "verdict": verdict, "reason": f"because {name}", **fields}


def call(tool: str = "refund_card", **fields: Any) -> CallFacts:
    return CallFacts(tool=tool, arguments=fields.pop("arguments", {"amount": 20}), **fields)


def test_deny_beats_ask_beats_allow_whatever_the_file_order() -> None:
    ruleset = rules(
        rule("allow all refunds", "allow", tool="refund_*"),
        rule("ask big", "ask", tool="refund_card", when="args.amount >= 10"),
        rule("deny huge", "deny", tool="refund_card", when="args.amount >= 1000"),
    )
    assert ruleset.evaluate(call(arguments={"amount": 5})).rule == "allow all refunds"
    assert ruleset.evaluate(call(arguments={"amount": 50})).verdict == "ask"
    huge = ruleset.evaluate(call(arguments={"amount": 5000}))
    assert (huge.verdict, huge.rule, huge.reason) == ("deny", "deny huge", "because deny huge")


def test_the_first_rule_in_file_order_breaks_a_tie() -> None:
    ruleset = rules(rule("first", "ask", tool="*"), rule("second", "ask", tool="refund_card"))
    assert ruleset.evaluate(call()).rule == "first"


def test_with_no_rule_the_tools_own_classes_decide() -> None:
    ruleset = rules(rule("other tool", "deny", tool="delete_*"))
    read_only = ruleset.evaluate(call("inventory_lookup", read_only=True))
    assert (read_only.verdict, read_only.rule) == ("allow", None)
    side_effect = ruleset.evaluate(call("create_customer"))
    assert (side_effect.verdict, side_effect.rule) == ("ask", None)


@pytest.mark.parametrize(
    ("fields", "facts", "matches"),
    [
        ({"domains": ["billing"]}, {"domains": ("billing", "crm")}, True),
        ({"domains": ["billing"]}, {"domains": ("crm",)}, False),
        ({"agents": ["billing-*"]}, {"agent": "billing-eu"}, True),
        ({"agents": ["billing-*"]}, {"agent": "crm"}, False),
        ({"users": ["*@example.com"]}, {"user": "ada@example.com"}, True),
        ({"users": ["*@example.com"]}, {}, False),  # no user: a user rule cannot match
        ({"target": {"backend": "local"}}, {"target": {"backend": "local", "x": 1}}, True),
        ({"target": {"backend": "local"}}, {"target": {"backend": "e2b"}}, False),
        ({"args": {"amount": [5, 20]}}, {}, True),
        ({"args": {"amount": [5, 20.0]}}, {}, True),  # 20.0 and 20 are one JSON number
        ({"args": {"amount": ["20"]}}, {}, False),  # a string that prints like it is not it
        ({"args": {"flag": [1]}}, {"arguments": {"flag": True}}, False),  # nor is true 1
        ({"args": {"flag": [True]}}, {"arguments": {"flag": True}}, True),
        ({"args": {"amount": [20], "order": ["A-1"]}}, {}, False),  # a missing argument
        (
            {"args": {"p": [{"b": [1], "a": None}]}},
            {"arguments": {"p": {"a": None, "b": [1]}}},
            True,
        ),  # nested values compare as canonical JSON, key order aside
    ],
)
def test_each_match_field_must_hold(
    fields: dict[str, Any], facts: dict[str, Any], matches: bool
) -> None:
    ruleset = rules(rule("r", "deny", **fields))
    assert (ruleset.evaluate(call(**facts)).rule == "r") is matches


def test_a_condition_sees_the_call_and_globs_are_case_sensitive() -> None:
    ruleset = rules(
        rule("tmp writes", "allow", tool="fs.*", when='args.path.startsWith("/tmp/") && '
             'agent == "builder" && "files" in domains'),
    )  # fmt: skip
    facts = {"agent": "builder", "domains": ("files",)}
    assert ruleset.evaluate(call("fs.write", arguments={"path": "/tmp/a"}, **facts)).rule
    assert not ruleset.evaluate(call("fs.write", arguments={"path": "/etc/a"}, **facts)).rule
    assert not ruleset.evaluate(call("FS.write", arguments={"path": "/tmp/a"}, **facts)).rule


def test_a_condition_that_cannot_be_evaluated_fails_safe() -> None:
    """A missing argument: an allow rule does not match, an ask or deny rule does."""
    allow = rules(rule("allow small", "allow", when="args.amount < 100"))
    assert allow.evaluate(call(arguments={})).verdict == "ask"  # the default, not the allow
    deny = rules(rule("deny big", "deny", when="args.amount > 100"))
    assert deny.evaluate(call(arguments={"amount": "lots"})).verdict == "deny"


def test_an_invalid_condition_is_a_typed_error_naming_the_rule() -> None:
    with pytest.raises(RuleConditionInvalid, match=r'rules\[0\] "broken".*not a CEL'):
        rules(rule("broken", "deny", when="args.amount <"))


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"verdict": "allow", "reason": "r"}, "`name` is required"),
        (rule("r", "permit"), "must be one of allow, ask, deny"),
        ({"name": "r", "verdict": "allow"}, "`reason` is required"),
        (rule("r", "allow", tools=["x"]), "unknown key 'tools'"),
        (rule("r", "allow", tool=[1]), "`tool` must be a string or a list"),
        (rule("r", "allow", examples=[{"expect": "allow"}]), "`tool` is required"),
        (rule("r", "allow", tool="t", examples=[{"expect": "maybe"}]), "`expect` must be"),
        (rule("r", "allow", args={"amount": 5}), "`args.amount` must be a non-empty list"),
        (rule("r", "allow", args={"amount": []}), "`args.amount` must be a non-empty list"),
        (rule("r", "allow", args=["amount"]), "`args` must be a table"),
        (rule("r", "allow", args={"amount": [float("nan")]}), "`args.amount`: .*NaN"),
    ],
)
def test_rules_are_loaded_strictly(table: dict[str, Any], message: str) -> None:
    with pytest.raises(RulesInvalid, match=message) as caught:
        rules(table)
    assert caught.value.code == "invalid_rules" and "nothing was loaded" in caught.value.message


def test_two_rules_may_not_share_a_name() -> None:
    with pytest.raises(RulesInvalid, match="another rule has that name"):
        rules(rule("same", "allow"), rule("same", "deny"))


def test_examples_are_decided_by_the_whole_rule_set(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(
        """
[approval]
forbid_self_approval = true

[[rules]]
name = "small refunds"
verdict = "allow"
reason = "routine"
tool = "refund_card"
when = "args.amount < 100"

[[rules.examples]]
arguments = { amount = 20 }
expect = "allow"

[[rules.examples]]
arguments = { amount = 5000 }
expect = "ask"

[[rules]]
name = "no refunds for blocked agents"
verdict = "deny"
reason = "blocked"
agents = ["blocked-*"]

[[rules.examples]]
tool = "refund_card"
agent = "blocked-1"
arguments = { amount = 20 }
expect = "allow"
""",
        encoding="utf-8",
    )
    results = check_examples(load_rules(path))
    assert [result.ok for result in results] == [True, True, False]
    miss = results[2]
    assert (miss.decision.verdict, miss.decision.rule) == ("deny", "no refunds for blocked agents")


def test_a_thousand_rules_index_by_tool() -> None:
    """Exact-tool rules are indexed: a call looks only at its tool's rules and the globs."""
    many = rules(*(rule(f"r{i}", "allow", tool=f"tool_{i}") for i in range(1000)))
    assert len(many) == 1000
    assert many.evaluate(call("tool_737")).rule == "r737"
    assert many.evaluate(call("tool_x")).rule is None


@pytest.mark.parametrize(
    "source",
    [
        "args.amount < 100",
        "has(args.missing) || args.amount > 5",
        "size(args) == 2",
        "args.exists(k, k == 'amount')",
        "args['amount'] == 20",
        "target.url.startsWith('https://shop.example/') && args.amount < 50",
        "'args.nothing' == 'args.nothing' && args.path.startsWith('/srv/')",
        "args.missing == 1",
    ],
)
def test_a_condition_given_only_the_keys_it_reads_decides_as_with_the_whole_call(
    source: str,
) -> None:
    condition = Condition.compile(source, "test")
    call = CallFacts(
        tool="t", arguments={"amount": 20, "path": "/srv/a"},
        target={"url": "https://shop.example/x", "element": {"box": {"x": 1}}},
    )  # fmt: skip
    whole = dataclasses.replace(condition, fields=())
    assert condition.holds(call.activation()) == whole.holds(call.activation())


def test_only_plain_key_reads_narrow_what_a_condition_is_given() -> None:
    assert Condition.compile("args.amount < 100 && target.url != ''", "t").fields == (
        ("args", frozenset({"amount"})), ("target", frozenset({"url"})),
    )  # fmt: skip
    assert Condition.compile("args.exists(k, k == 'x')", "t").fields == ()
    assert Condition.compile("size(args) > 1 && args.a == 1", "t").fields == ()


def test_sites_match_the_url_a_browser_action_is_about_as_the_browser_reads_it() -> None:
    rules = rules_from_document({"rules": [
        {"name": "shop", "verdict": "allow", "reason": "r", "tool": "browser.*",
         "sites": ["*.example.com"]},
        {"name": "admin", "verdict": "deny", "reason": "no", "tool": "browser.*",
         "sites": ["https://admin.example.com"]},
    ]})  # fmt: skip

    def on(page: str, **arguments: Any) -> str:
        call = CallFacts(tool="browser.click", arguments=arguments, target={"url": page})
        return rules.evaluate(call).verdict

    assert on("https://shop.example.com/cart") == "allow"
    assert on("https://example.com.evil.io/") == "ask"
    assert on("https://shop.example.com\\@evil.io/") == "ask"  # reads two ways: never allowed
    assert on("https://admin.example.com/users") == "deny"
    assert on("https://evil.io/", target_url="https://shop.example.com/") == "allow"
    assert on("https://shop.example.com/", target_url="https://evil.io/") == "ask"
    with pytest.raises(RulesInvalid, match="not a domain pattern"):
        rules_from_document({"rules": [{"name": "x", "verdict": "allow", "reason": "r",
                                        "sites": ["https://shop.example.com/path"]}]})  # fmt: skip
