"""Policy replay over 100k recorded proposals (issue 14; goal <= 5 s).

The proposals follow the shipped workload's generator (``tests/data/generate_workload.py``)
run for as many days as it takes: shell commands, refunds with unique order ids and amounts,
fetches, browser clicks, MCP labels, file writes, sandbox runs; about 3% rejected. They are
bulk-inserted through the store's repository in one transaction (the bench's setup, not timed).

Timed, in the same run, on the same SQLite file:

* **replay**: read every proposal (``supervisor.rules.history.read_history``), resolve edit
  chains and outcomes, and decide each call with a candidate rule set (the rules ``policy
  suggest`` writes for the shipped workload plus a hand-written one with deny rules);
* **peer**: plain listing of the same proposals through ``ApprovalLedger.list`` (pages of 1,000,
  the public API), which does no evaluation at all.

    .venv/bin/python bench/bench_replay.py --proposals 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "data"))
sys.path.insert(0, str(ROOT / "tests"))

from generate_workload import START, Workload  # noqa: E402

from supervisor.ledger.models import Proposal, ProposalStatus  # noqa: E402
from supervisor.rules.history import read_history  # noqa: E402
from supervisor.rules.loader import load_rules  # noqa: E402
from supervisor.rules.replay import decided_calls, replay  # noqa: E402
from supervisor.rules.suggest import suggest  # noqa: E402
from supervisor.store.provider import SQLModelProvider  # noqa: E402

_STATUS = {"approve": "executed", "fail": "failed", "edit": "executed", "reject": "rejected",
           "expire": "expired", "cancel": "cancelled", "reconcile_failed": "failed",
           "pending": "pending"}  # fmt: skip
HAND_WRITTEN = """
[[rules]]
name = "shell reads"
verdict = "allow"
reason = "git and ls only read"
tool = "shell.run"
when = 'args.command.startsWith("git ") || args.command.startsWith("ls ")'

[[rules]]
name = "no force push"
verdict = "deny"
reason = "never force-push"
tool = "shell.*"
when = 'args.command.contains("--force")'

[[rules]]
name = "small refunds"
verdict = "allow"
reason = "routine"
tool = "refund_card"
when = "args.amount < 100"
"""


def _calls(count: int) -> list[dict[str, Any]]:
    workload = Workload(seed=2026)
    day = 0
    while len(workload.calls) < count:
        workload.day(day)
        day += 1
    return workload.calls[:count]


def _proposal(call: dict[str, Any], start: datetime) -> Proposal:
    created = start + timedelta(seconds=call["t"])
    status = _STATUS[call["then"]]
    decided = None if status == "pending" else created + timedelta(seconds=call["after"])
    return Proposal.model_construct(
        proposal_id=uuid.uuid4().hex, tool_name=call["tool"], tool_schema_hash="0" * 64,
        arguments=call["args"], args_hash=uuid.uuid4().hex * 2, execution_target=call["target"],
        policy_reason="", owner=call["agent"], user=call["user"], thread_id=None,
        checkpoint_id=None, call_id=None, domains=tuple(call["domains"]), risk=None,
        status=ProposalStatus(status), created_at=created, updated_at=decided or created,
        expires_at=created + timedelta(minutes=15), decided_at=decided,
        approver_id=call.get("by"), approver_context=None, decision_reason=call.get("why"),
        supersedes_id=None, superseded_by_id=None,
    )  # fmt: skip


def _fill(url: str, count: int) -> None:
    start = datetime.fromisoformat(START)
    with SQLModelProvider(url) as provider:
        with provider.ledger.repository.write(audited=False) as tx:
            for call in _calls(count):
                tx.insert_proposal(_proposal(call, start))


def _timed(action: Any) -> tuple[float, Any]:
    begin = time.perf_counter()
    value = action()
    return time.perf_counter() - begin, value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proposals", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reuse", type=Path, default=None,
                        help="A ledger this bench filled before (skips the setup).")  # fmt: skip
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    url = f"sqlite:///{args.reuse or folder / 'ledger.db'}"
    if args.reuse is None:
        setup, _ = _timed(lambda: _fill(url, args.proposals))
        print(f"{args.proposals} proposals bulk-inserted in {setup:.1f} s (setup)")
    hand = folder / "hand.toml"
    hand.write_text(HAND_WRITTEN, encoding="utf-8")
    with SQLModelProvider(url, read_only=True) as provider:
        ledger = provider.ledger
        history = decided_calls(read_history(ledger.repository))
        suggest_seconds, suggested = _timed(lambda: suggest(history, min_approvals=5))
        candidates = {"hand-written (3 rules)": load_rules(hand)}
        from supervisor.rules.loader import rules_from_document

        document = suggested.document()
        candidates[f"suggested ({len(document['rules'])} rules)"] = rules_from_document(document)
        print(f"suggest over {len(history)} decided calls: {suggest_seconds:.2f} s")
        distinct = len({item.call.key for item in history})
        print(f"distinct calls (each evaluated once): {distinct} of {len(history)}")
        peers: list[float] = []
        for name, rules in candidates.items():
            times: list[float] = []
            for _ in range(args.rounds):
                seconds, report = _timed(
                    lambda rules=rules: replay(
                        rules, decided_calls(read_history(ledger.repository))
                    )
                )
                times.append(seconds)
                peer, listed = _timed(lambda: _list_all(ledger))
                peers.append(peer)
                assert listed == args.proposals
            print(f"replay, {name}: median {statistics.median(times):.2f} s, max "
                  f"{max(times):.2f} s; saved {report.prompts_saved} of {report.prompts} "
                  f"prompts, {len(report.rejected_allowed)} rejected allowed")  # fmt: skip
        print(f"peer: ApprovalLedger.list pages of 1000: median {statistics.median(peers):.2f} s")


def _list_all(ledger: Any) -> int:
    cursor, count = None, 0
    while True:
        page = ledger.list(limit=1000, cursor=cursor)
        count += len(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return count


if __name__ == "__main__":
    main()
