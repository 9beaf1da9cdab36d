"""Replay's reading of history, suggestions' constraints and the literals they are written in."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime, timedelta
from typing import Any

import cel
import pytest

from supervisor.canonical import canonical_json
from supervisor.rules.constraints import OneOf, Prefixes, Range, learn
from supervisor.rules.literals import cel_field, cel_literal, toml_value
from supervisor.rules.loader import rules_from_document
from supervisor.rules.replay import RecordedCall, decided_calls, replay

T0 = datetime(2030, 3, 4, 8, tzinfo=UTC)
ALLOW_SMALL = rules_from_document({"rules": [
    {"name": "small", "verdict": "allow", "reason": "small", "tool": "refund",
     "when": "args.amount < 100"},
]})  # fmt: skip


def _call(number: int, status: str, amount: int = 10, **fields: Any) -> RecordedCall:
    return RecordedCall(
        proposal_id=f"p{number}", tool="refund", arguments_json=canonical_json({"amount": amount}),
        target_json="{}", domains_json="[]", agent="bot", user=None, status=status,
        created_at=T0 + timedelta(hours=number), approver_id="alice", **fields,
    )  # fmt: skip


def test_an_edit_chain_counts_once_with_the_models_call_and_the_live_ends_outcome() -> None:
    calls = [
        _call(1, "superseded", amount=500, superseded_by_id="p2"),
        _call(2, "executed", amount=50, supersedes_id="p1"),
        _call(3, "pending"),
        _call(4, "rejected", amount=20),
        _call(5, "expired"),
    ]
    history = decided_calls(calls)
    assert [(d.call.proposal_id, d.final.proposal_id, d.outcome, d.edited) for d in history] == [
        ("p1", "p2", "approved", True), ("p4", "p4", "rejected", False),
        ("p5", "p5", "undecided", False),
    ]  # fmt: skip
    report = replay(ALLOW_SMALL, history)
    # The model asked for 500 (asked), a human edited it to 50: not an allowed edit.
    assert report.verdicts == {"allow": 2, "ask": 1, "deny": 0}
    assert (report.prompts, report.prompts_saved) == (2, 1)
    assert [f.proposal_id for f in report.rejected_allowed] == ["p4"]
    assert report.edited_allowed == []


def test_a_link_the_edit_did_not_write_is_not_followed() -> None:
    calls = [_call(1, "superseded", superseded_by_id="p2"), _call(2, "approved", amount=900)]
    history = decided_calls(calls)  # p2 does not point back: two separate calls
    assert [(d.call.proposal_id, d.final.proposal_id) for d in history] == [
        ("p1", "p1"), ("p2", "p2"),
    ]  # fmt: skip


def test_calls_decided_by_rules_are_counted_apart_and_never_as_prompts() -> None:
    calls = [_call(1, "executed", decided_by_rule="small", policy_version=3),
             _call(2, "executed")]  # fmt: skip
    report = replay(ALLOW_SMALL, decided_calls(calls))
    assert report.human["by_rule"] == 1 and report.human["approved"] == 1
    assert (report.prompts, report.prompts_saved) == (1, 1)


def test_reconciled_failed_is_flagged_like_a_rejection_with_who_and_why() -> None:
    calls = [_call(1, "failed", reconciled_failed=("carol", "no refund at the bank"))]
    report = replay(ALLOW_SMALL, decided_calls(calls))
    (flag,) = report.rejected_allowed
    assert (flag.flag, flag.by, flag.reason, flag.rule) == (
        "reconciled_failed", "carol", "no refund at the bank", "small",
    )  # fmt: skip
    assert not report.safe


def test_the_timeline_has_every_bucket_between_the_first_and_last_call() -> None:
    calls = [_call(0, "executed"), _call(3, "executed", amount=700)]
    report = replay(ALLOW_SMALL, decided_calls(calls))
    assert report.unit == "hour"
    assert [(b.start.hour, b.allow, b.ask) for b in report.timeline] == [
        (8, 1, 0), (9, 0, 0), (10, 0, 0), (11, 0, 1),
    ]  # fmt: skip
    days = replay(ALLOW_SMALL, decided_calls([_call(0, "executed"), _call(80, "executed")]))
    assert days.unit == "day" and len(days.timeline) == 4


def test_constraints_widen_only_safe_shapes() -> None:
    assert learn([5, 12.5, 80]) == Range(5, 80)
    directories = learn(["/srv/docs/a.md", "/srv/docs/b.md", "/tmp/x"])
    assert directories is None  # "/tmp/" is too shallow to widen, and not every path fits
    docs = learn(["/srv/docs/a.md", "/srv/docs/b.md"])
    assert docs == Prefixes(("/srv/docs/",), paths=True)
    assert not docs.accepts("/srv/docs/../app/.env") and docs.accepts("/srv/docs/new.md")
    web = learn(["https://a.example/x", "https://a.example/y", "https://b.example/z"])
    assert web == Prefixes(("https://a.example/",), paths=False)
    assert not web.accepts("https://a.example.evil.net/")
    orders = learn([f"A-{n}" for n in range(1000, 1010)])
    assert orders is not None and orders.accepts("A-4242") and not orders.accepts("A-1; rm")
    # Commands, even one word, stay exact: one of the values approved at least twice.
    assert learn(["uptime", "uptime", "whoami", "df -h"]) == OneOf((canonical_json("uptime"),))
    assert learn(["a", "b", "c"]) is None


def test_a_range_narrows_to_the_side_that_keeps_more_approvals() -> None:
    low, high = Range(5, 85).narrowed(60)
    assert (low.accepts(59.9), low.accepts(60), high.accepts(60), high.accepts(61)) == (
        True, False, False, True,
    )  # fmt: skip


@pytest.mark.parametrize(
    "value",
    ['say "hi"\\n', "line\nbreak\ttab", "bidi \u202e override", "emoji \U0001f600", 'key"s',
     {"nested": [1, 2.5, True, None, "x"]}, -(2**63), 1e20],
)  # fmt: skip
def test_cel_literals_mean_exactly_the_value(value: Any) -> None:
    program = cel.compile(f"{cel_field('args', 'in')} == {cel_literal(value)}")
    assert program.execute({"args": {"in": value}}) is True
    assert program.execute({"args": {"in": "something else"}}) is False


def test_toml_values_read_back_unchanged_and_show_no_hidden_characters() -> None:
    value = {"path": "/srv/\u202ex", "odd key": [1, 2.5, True], "n": {"deep": 'q"\\'}}
    text = f"v = {toml_value(value)}"
    assert "\u202e" not in text and tomllib.loads(text)["v"] == value
    with pytest.raises(ValueError, match="null"):
        toml_value({"a": None})


def test_suggestions_with_null_targets_are_still_a_policy_file() -> None:
    """A target value with a null (no TOML form) is compared in the condition instead."""
    from supervisor.rules.suggest import suggest
    from supervisor.rules.suggest_toml import suggestions_toml

    target = canonical_json({"backend": "local", "element": {"frame": None, "tag": "input"}})
    calls = [
        _call(n, "executed")._replace(target_json=target, approver_id=f"op{n % 2}")
        for n in range(6)
    ]
    result = suggest(decided_calls(calls), min_approvals=5)
    (suggestion,) = result.suggestions
    assert suggestion.target_exact == {"backend": "local"}
    rules = rules_from_document(tomllib.loads(suggestions_toml(result)))
    assert rules.evaluate(calls[0].facts()).rule == "suggested: refund"
    other = calls[0]._replace(target_json=canonical_json({"backend": "local", "element": {}}))
    assert rules.evaluate(other.facts()).verdict == "ask"
