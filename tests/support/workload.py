"""The shipped workload (``tests/data/workload.jsonl``) written into a real ledger.

Every call goes through the public ledger API (``propose``, ``approve``, ``reject``,
``cancel``, ``edit``, ``claim``, ``complete``, ``fail``, ``expire_due``, ``recover``,
``reconcile``) under a :class:`~supervisor.ledger.clock.ManualClock` moved to the call's time,
so the ledger holds what six days of supervision would have left: timestamps spread over the
days, audit records, executions and one call reconciled as failed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from supervisor.ledger.clock import ManualClock
from supervisor.ledger.models import ExecutorIdentity
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider

WORKLOAD = Path(__file__).resolve().parents[1] / "data" / "workload.jsonl"
SCHEMA_HASH = "0" * 64


@dataclass(frozen=True)
class WorkloadCall:
    """One line of the workload: the call, what the human did, and when."""

    line: int
    t: int
    tool: str
    args: dict[str, Any]
    target: dict[str, Any]
    domains: tuple[str, ...]
    agent: str
    user: str
    then: str
    after: int
    by: str | None = None
    why: str | None = None
    edit: dict[str, Any] | None = None


def read_workload(path: Path = WORKLOAD) -> tuple[datetime, int, list[WorkloadCall]]:
    """The start time, the TTL in seconds and the calls of the workload file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    calls = []
    for number, text in enumerate(lines[1:], start=2):
        raw = json.loads(text)
        calls.append(WorkloadCall(
            line=number, t=raw["t"], tool=raw["tool"], args=raw["args"], target=raw["target"],
            domains=tuple(raw["domains"]), agent=raw["agent"], user=raw["user"],
            then=raw["then"], after=raw["after"], by=raw.get("by"), why=raw.get("why"),
            edit=raw.get("edit"),
        ))  # fmt: skip
    return datetime.fromisoformat(header["start"]), int(header["ttl_seconds"]), calls


def _executor(call: WorkloadCall) -> ExecutorIdentity:
    # A pid no process has: the reconcile_failed call's executor is "gone" when recovery looks.
    return ExecutorIdentity(executor_id=f"{call.agent}-run", pid=4_000_000 + call.line,
                            host="workload-host")  # fmt: skip


def _all_but(gone: int) -> Callable[[int, str], bool]:
    """A liveness check for which only the process ``gone`` has stopped."""
    return lambda pid, host: pid != gone


def write_workload(
    ledger: ApprovalLedger, clock: ManualClock, calls: list[WorkloadCall], start: datetime,
    ttl_seconds: int,
) -> dict[int, str]:  # fmt: skip
    """Write ``calls`` into ``ledger``; returns line number -> the id of the proposal that
    stands for the call (an edit's new proposal)."""
    ids: dict[int, str] = {}
    for call in calls:
        clock.set(start + timedelta(seconds=call.t))
        proposal = ledger.propose(
            call.tool, SCHEMA_HASH, call.args, execution_target=call.target,
            policy_reason="side effects", owner=call.agent, user=call.user,
            thread_id=f"{call.agent}-thread", domains=call.domains, ttl_seconds=ttl_seconds,
        )  # fmt: skip
        ids[call.line] = proposal.proposal_id
        if call.then == "pending":
            continue
        clock.advance(call.after)
        by = call.by or "operator"
        if call.then == "expire":
            assert proposal.proposal_id in ledger.expire_due()
            continue
        if call.then == "reject":
            ledger.reject(proposal.proposal_id, by, call.why, via="tui")
            continue
        if call.then == "cancel":
            ledger.cancel(proposal.proposal_id, by, call.why, via="sdk")
            continue
        if call.then == "edit":
            assert call.edit is not None
            proposal = ledger.edit(proposal.proposal_id, call.edit, by, call.why, via="tui")
            ids[call.line] = proposal.proposal_id
            clock.advance(3)
        ledger.approve(proposal.proposal_id, by, call.why, via="tui")
        executor = _executor(call)
        ledger.claim(proposal.proposal_id, proposal.args_hash, executor)
        clock.advance(1)
        if call.then == "fail":
            ledger.fail(proposal.proposal_id, "error", "the tool raised", executor=executor)
        elif call.then == "reconcile_failed":
            flagged = ledger.recover(is_alive=_all_but(executor.pid))
            assert [e.proposal_id for e in flagged] == [proposal.proposal_id]
            clock.advance(60)
            ledger.reconcile(proposal.proposal_id, "failed", by, call.why, via="tui")
        else:
            ledger.complete(proposal.proposal_id, "success", executor=executor)
    return ids


def workload_ledger(
    path: Path, source: Path = WORKLOAD
) -> tuple[dict[int, str], list[WorkloadCall]]:
    """A new SQLite ledger at ``path`` holding the workload; line -> proposal id, and calls."""
    start, ttl, calls = read_workload(source)
    clock = ManualClock(start)
    with SQLModelProvider(f"sqlite:///{path}", clock=clock) as provider:
        ids = write_workload(provider.ledger, clock, calls, start, ttl)
    return ids, calls
