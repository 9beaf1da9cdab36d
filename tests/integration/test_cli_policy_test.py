"""``supervisor policy test FILE``: a team's CI check of its rules' examples (real CLI)."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import assert_one_line_error, run_cli

RULES = """
[[rules]]
name = "small refunds"
verdict = "allow"
reason = "Refunds under 100 are routine"
tool = "refund_card"
when = "args.amount < {limit}"

[[rules.examples]]
arguments = {{ amount = 20 }}
expect = "allow"

[[rules.examples]]
arguments = {{ amount = 500 }}
expect = "ask"
"""


def test_a_wrong_example_fails_the_check_and_says_which(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(RULES.format(limit=1000), encoding="utf-8")  # 500 is now allowed: a miss
    done = run_cli("policy", "test", str(path))
    assert done.returncode == 1, done.stderr
    assert 'MISS rules[0] "small refunds" example 2: refund_card expected ask, got allow' in (
        done.stdout
    )
    assert "1 of 2 examples hold" in done.stdout
    path.write_text(RULES.format(limit=100), encoding="utf-8")
    fixed = run_cli("policy", "test", str(path), "--json")
    assert fixed.returncode == 0, fixed.stderr
    report = json.loads(fixed.stdout)
    assert (report["examples"], report["misses"]) == (2, 0)
    assert [r["rule"] for r in report["results"]] == ["small refunds", None]


def test_an_unusable_rule_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(RULES.format(limit="").replace("< ", "<"), encoding="utf-8")
    assert_one_line_error(run_cli("policy", "test", str(path)), "invalid_rule_condition")
    assert_one_line_error(
        run_cli("policy", "test", str(tmp_path / "missing.toml")), "invalid_rules"
    )
