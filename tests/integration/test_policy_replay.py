"""``supervisor policy replay`` over the shipped workload (a real SQLite ledger, the real CLI).

The expected numbers are computed here from ``tests/data/workload.jsonl`` itself, with the
candidate's rules written again in Python, never from the code under test.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_one_line_error, run_cli
from support.workload import WorkloadCall, read_workload, workload_ledger

CANDIDATE = """
[[rules]]
name = "shell reads"
verdict = "allow"
reason = "git and ls only read"
tool = "shell.run"
when = 'args.command.startsWith("git ") || args.command.startsWith("ls ")'

[[rules]]
name = "small refunds"
verdict = "allow"
reason = "Refunds under 100 are routine"
tool = "refund_card"
when = "args.amount < 100"

[[rules]]
name = "sandbox"
verdict = "allow"
reason = "the sandbox has no network"
tool = "run_code"
target = { backend = "bubblewrap" }

[[rules]]
name = "no metadata or pypi"
verdict = "deny"
reason = "not from this agent"
tool = "http.*"
when = 'args.url.contains("169.254.169.254") || args.url.contains("pypi.org")'
"""

APPROVED = {"approve", "fail", "edit", "reconcile_failed"}


def candidate_verdict(call: WorkloadCall) -> str:
    """The candidate above, by hand (deny beats allow; no rule: ask)."""
    url = str(call.args.get("url", ""))
    if call.tool.startswith("http.") and ("169.254.169.254" in url or "pypi.org" in url):
        return "deny"
    command = str(call.args.get("command", ""))
    if call.tool == "shell.run" and command.startswith(("git ", "ls ")):
        return "allow"
    if call.tool == "refund_card" and call.args["amount"] < 100:
        return "allow"
    if call.tool == "run_code" and call.target.get("backend") == "bubblewrap":
        return "allow"
    return "ask"


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, str]]:
    path = tmp_path_factory.mktemp("workload") / "ledger.db"
    ids, _ = workload_ledger(path)
    return path, ids


def _expected(calls: list[WorkloadCall], ids: dict[int, str]) -> dict[str, Any]:
    decided = [call for call in calls if call.then != "pending"]
    verdicts = Counter(candidate_verdict(call) for call in decided)
    prompts = [call for call in decided if call.then in APPROVED | {"reject"}]
    bad = [c for c in decided if c.then in ("reject", "reconcile_failed")]
    return {
        "replayed": len(decided),
        "verdicts": {v: verdicts[v] for v in ("allow", "ask", "deny")},
        "human": {
            "approved": sum(c.then in APPROVED for c in decided),
            "rejected": sum(c.then == "reject" for c in decided),
            "undecided": sum(c.then in ("expire", "cancel") for c in decided),
            "by_rule": 0,
            "reconciled_failed": sum(c.then == "reconcile_failed" for c in decided),
            "edited": sum(c.then == "edit" for c in decided),
        },
        "prompts": len(prompts),
        "prompts_saved": sum(candidate_verdict(c) != "ask" for c in prompts),
        "rejected_allowed": sorted(ids[c.line] for c in bad if candidate_verdict(c) == "allow"),
        "edited_allowed": sorted(
            ids[c.line] for c in decided if c.then == "edit" and candidate_verdict(c) == "allow"
        ),
        "approved_denied": sorted(
            ids[c.line] for c in decided if c.then in APPROVED and candidate_verdict(c) == "deny"
        ),
    }


def test_replay_reports_the_exact_counts_and_every_rejected_call_it_would_allow(
    workload: tuple[Path, dict[int, str]], tmp_path: Path
) -> None:
    db, ids = workload
    _, _, calls = read_workload()
    expected = _expected(calls, ids)
    # The workload has what the figures need: rejections it allows, one reconciled failure.
    assert len(expected["rejected_allowed"]) == 4 and expected["human"]["rejected"] == 14
    policy = tmp_path / "candidate.toml"
    policy.write_text(CANDIDATE, encoding="utf-8")

    done = run_cli("policy", "replay", str(policy), "--db", str(db), "--json")
    assert done.returncode == 1, done.stderr  # a rejected call would be allowed: CI fails
    report = json.loads(done.stdout)
    for key in ("replayed", "verdicts", "human", "prompts", "prompts_saved"):
        assert report[key] == expected[key], key
    for key in ("rejected_allowed", "edited_allowed", "approved_denied"):
        assert sorted(flag["proposal_id"] for flag in report[key]) == expected[key], key
    failed = [f for f in report["rejected_allowed"] if f["human"] == "reconciled_failed"]
    (line,) = [c for c in calls if c.then == "reconcile_failed"]
    assert [(f["tool"], f["rule"], f["by"]) for f in failed] == [("run_code", "sandbox", line.by)]
    assert failed[0]["reason"].startswith("no export.zip in the bucket")
    assert sum(bucket["allow"] for bucket in report["timeline"]) == expected["verdicts"]["allow"]
    assert report["unit"] == "day" and len(report["timeline"]) == 6

    human = run_cli("policy", "replay", str(policy), "--db", str(db))
    assert human.returncode == 1, human.stderr
    lines = human.stdout.splitlines()
    assert lines[0].startswith("!! 4 call(s) a human REJECTED (or reconciled as failed) would be")
    flagged_block = "\n".join(lines[1 : 1 + 3 * 4])
    assert all(proposal_id in flagged_block for proposal_id in expected["rejected_allowed"])
    assert lines[-1] == "FAIL: 4 rejected call(s) would be allowed."


def test_replay_since_and_a_clean_policy_exit_zero(
    workload: tuple[Path, dict[int, str]], tmp_path: Path
) -> None:
    db, ids = workload
    start, _, calls = read_workload()
    policy = tmp_path / "candidate.toml"
    policy.write_text(CANDIDATE, encoding="utf-8")
    done = run_cli("policy", "replay", str(policy), "--db", str(db), "--json",
                   "--since", (start + timedelta(days=5)).isoformat())  # fmt: skip
    window = [c for c in calls if c.t >= 5 * 86400]
    expected = _expected(window, ids)
    report = json.loads(done.stdout)
    assert report["replayed"] == expected["replayed"] < len(calls) // 3
    assert (
        sorted(f["proposal_id"] for f in report["rejected_allowed"])
        == (expected["rejected_allowed"])
    )
    assert done.returncode == (1 if expected["rejected_allowed"] else 0)
    assert report["unit"] == "hour"  # one day of history: hourly buckets

    deny_only = tmp_path / "deny.toml"
    deny_only.write_text("[[rules]]" + CANDIDATE.split("[[rules]]")[-1], encoding="utf-8")
    clean = run_cli("policy", "replay", str(deny_only), "--db", str(db))
    assert clean.returncode == 0, clean.stdout
    assert clean.stdout.splitlines()[-1] == "OK: no call a human rejected would be allowed."


def test_replay_errors_are_one_line_and_exit_2(
    workload: tuple[Path, dict[int, str]], tmp_path: Path
) -> None:
    db, _ = workload
    broken = tmp_path / "broken.toml"
    broken.write_text('[[rules]]\nname = "x"\nverdict = "sometimes"\nreason = "r"\n')
    assert_one_line_error(run_cli("policy", "replay", str(broken), "--db", str(db)),
                          "invalid_rules")  # fmt: skip
    good = tmp_path / "good.toml"
    good.write_text(CANDIDATE, encoding="utf-8")
    assert_one_line_error(
        run_cli("policy", "replay", str(good), "--db", str(tmp_path / "missing.db")),
        "ledger_not_found",
    )
    bad_since = run_cli("policy", "replay", str(good), "--db", str(db), "--since", "soon")
    assert bad_since.returncode == 2 and "--since" in bad_since.stderr


def test_ledger_text_in_the_replay_is_escaped(tmp_path: Path) -> None:
    from supervisor.store.provider import SQLModelProvider

    db = tmp_path / "ledger.db"
    with SQLModelProvider(f"sqlite:///{db}") as provider:
        ledger = provider.ledger
        proposal = ledger.propose("refund_card", "0" * 64, {"amount": 5, "note": "\u202eevil"},
                                  owner="bot\x1b[2J")  # fmt: skip
        ledger.reject(proposal.proposal_id, "alice", "no\nOK: no call a human rejected\x1b]0;x\x07")
    policy = tmp_path / "candidate.toml"
    policy.write_text(CANDIDATE, encoding="utf-8")
    done = run_cli("policy", "replay", str(policy), "--db", str(db))
    assert done.returncode == 1
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout
    assert not any(line.startswith("OK:") for line in done.stdout.splitlines())
    assert "\\u001b" in done.stdout and "\\u202e" in done.stdout


def test_apply_replays_first_and_refuses_a_policy_that_would_allow_a_rejected_call(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    ids, calls = workload_ledger(db)
    decided = [call for call in calls if call.then != "pending"]
    rejected_allowed = [c for c in decided if c.then in ("reject", "reconcile_failed")
                        and candidate_verdict(c) == "allow"]  # fmt: skip
    assert rejected_allowed, "the candidate must allow a rejected call for this test"
    policy = tmp_path / "candidate.toml"
    policy.write_text(CANDIDATE, encoding="utf-8")

    refused = run_cli("policy", "apply", str(policy), "--db", str(db))  # no terminal, no --yes
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stdout.startswith("!! ")  # the rejected-but-allowed calls come first
    assert ids[rejected_allowed[0].line] in refused.stdout
    assert f"Not applied: {len(rejected_allowed)} call(s) a human rejected" in refused.stderr
    assert "No approval policy stored" in run_cli("policy", "show", "--db", str(db)).stdout

    deny_only = tmp_path / "deny.toml"
    deny_only.write_text("[[rules]]" + CANDIDATE.split("[[rules]]")[-1], encoding="utf-8")
    safe = run_cli("policy", "apply", str(deny_only), "--db", str(db))
    assert safe.returncode == 0, safe.stderr
    assert f"Replayed {len(decided)} decided calls" in safe.stdout
    assert "OK: no call a human rejected would be allowed." in safe.stdout
    assert "Applied approval policy v1" in safe.stdout

    forced = run_cli("policy", "apply", str(policy), "--yes", "--reason", "accepted", "--db",
                     str(db))  # fmt: skip
    assert forced.returncode == 0, forced.stderr
    assert "Applied approval policy v2" in forced.stdout
