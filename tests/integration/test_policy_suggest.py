"""``supervisor policy suggest``: rules for what operators keep approving, never for a "no".

Every check of safety here decides the workload's own rejected calls (read from the JSONL file)
with the suggested file through the rule evaluator, not through replay or suggest.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from support.cli import run_cli
from support.workload import WORKLOAD, WorkloadCall, read_workload, workload_ledger

from supervisor.rules.loader import load_rules
from supervisor.rules.model import CallFacts

SAID_NO = ("reject", "reconcile_failed", "edit")  # an edit: the call as proposed was refused


def _facts(call: WorkloadCall) -> CallFacts:
    return CallFacts(tool=call.tool, arguments=call.args, domains=call.domains, agent=call.agent,
                     user=call.user, target=call.target)  # fmt: skip


def _suggested(db: Path, out: Path, *extra: str) -> dict[str, object]:
    done = run_cli("policy", "suggest", "--db", str(db), "--out", str(out), "--json", *extra)
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_suggestions_cut_prompts_and_allow_no_call_a_human_refused(tmp_path: Path) -> None:
    db, out = tmp_path / "ledger.db", tmp_path / "suggested.toml"
    workload_ledger(db)
    _, _, calls = read_workload()
    report = _suggested(db, out)
    rules = load_rules(out)
    refused = [call for call in calls if call.then in SAID_NO]
    assert len(refused) == 17
    assert [c.tool for c in refused if rules.evaluate(_facts(c)).verdict == "allow"] == []
    # Prompts a human answered (approved or rejected) that the file would decide itself.
    prompts = [c for c in calls if c.then not in ("pending", "expire", "cancel")]
    saved = [c for c in prompts if rules.evaluate(_facts(c)).verdict != "ask"]
    assert len(saved) / len(prompts) >= 0.8, (len(saved), len(prompts))
    replay = report["replay"]
    assert isinstance(replay, dict)
    assert (replay["prompts"], replay["prompts_saved"]) == (len(prompts), len(saved))
    assert [r["tool"] for r in report["rules"]] == [  # type: ignore[attr-defined]
        "shell.run", "refund_card", "http.fetch", "mcp:github.add_label", "browser.click",
        "run_code",
    ]  # fmt: skip
    written = tomllib.loads(out.read_text())["rules"]
    refund = next(r for r in written if r["tool"] == "refund_card")
    # Exact values are a set lookup (`args`), not a CEL list evaluated per call.
    assert refund["args"] == {"currency": ["EUR"]} and "currency" not in refund["when"]
    shell = next(r for r in written if r["tool"] == "shell.run")
    assert "git status" in shell["args"]["command"] and " in [" not in shell["when"]
    # The in-range duplicate refund (85 EUR) a human rejected narrows the range below it.
    assert "args.amount >= 5 && args.amount < 85" in refund["when"]
    assert {"amount": 85, "currency": "EUR", "order": "A-7420"} in [
        example["arguments"] for example in refund["examples"] if example["expect"] == "ask"
    ]

    checked = run_cli("policy", "test", str(out))
    assert checked.returncode == 0, checked.stdout
    replayed = run_cli("policy", "replay", str(out), "--db", str(db))
    assert replayed.returncode == 0, replayed.stdout
    printed = run_cli("policy", "suggest", "--db", str(db))  # no --out: the TOML on stdout
    assert printed.returncode == 0 and printed.stdout == out.read_text(encoding="utf-8")


def test_a_new_rejection_narrows_the_suggestion_instead_of_being_allowed(tmp_path: Path) -> None:
    """A refund inside the approved range and a command identical to approved ones, both
    rejected afterwards: the suggestion excludes them (and still suggests a refund rule)."""
    lines = WORKLOAD.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    extra = [
        {"t": last["t"] + 600, "tool": "refund_card", "after": 30, "by": "alice",
         "args": {"order": "A-8001", "amount": 40, "currency": "EUR"}, "target": {},
         "domains": ["billing"], "agent": "billing-bot", "user": "dana", "then": "reject",
         "why": "customer already refunded by bank transfer"},
        {"t": last["t"] + 1200, "tool": "shell.run", "after": 30, "by": "bob",
         "args": {"command": "git status", "cwd": "/srv/app"}, "target": {"host": "build-01"},
         "domains": ["shell"], "agent": "ops-agent", "user": "dana", "then": "reject",
         "why": "not during the release freeze"},
    ]  # fmt: skip
    source = tmp_path / "workload.jsonl"
    source.write_text("\n".join([*lines, *map(json.dumps, extra)]) + "\n", encoding="utf-8")
    db, out = tmp_path / "ledger.db", tmp_path / "suggested.toml"
    workload_ledger(db, source)
    _, _, calls = read_workload(source)
    _suggested(db, out, "--min-approvals", "10")
    rules = load_rules(out)
    refused = [call for call in calls if call.then in SAID_NO]
    assert [c.args for c in refused if rules.evaluate(_facts(c)).verdict == "allow"] == []
    assert "suggested: refund_card" in [rule.name for rule in rules.rules]
    still = CallFacts(tool="shell.run", arguments={"command": "df -h", "cwd": "/srv/app"},
                      agent="ops-agent", target={"host": "build-01"})  # fmt: skip
    assert rules.evaluate(still).verdict == "allow"  # the rest of the shell rule stands
