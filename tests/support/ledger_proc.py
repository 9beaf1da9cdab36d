"""Subprocess entry points for the ledger's race and crash tests (run with PYTHONPATH=tests).

    python -m support.ledger_proc claim URL WORKER IDS_FILE SEED  race to claim listed proposals
    python -m support.ledger_proc decide URL APPROVER ACTION IDS  race to approve/reject them
    python -m support.ledger_proc put-blob URL CONTENT_FILE       race to store the same blob
    python -m support.ledger_proc crash URL POINT SIDE_EFFECTS    stop dead at a crash point
    python -m support.ledger_proc restart URL SIDE_EFFECTS        recover, then resume what may run

Each process opens its own ``SQLModelProvider`` (its own engine and connections). The racing
commands print ``ready`` once the ledger is open, then block on stdin until the test writes a
line: a barrier that releases every racer together without sleeping. ``crash`` prints
``crash-point POINT`` and blocks in ``signal.pause()`` so the test can SIGKILL it exactly there.
Results are one JSON line on stdout.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
from pathlib import Path
from typing import Any, Literal, NoReturn, get_args

from supervisor.ledger import ExecutorIdentity, LedgerError, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider

CrashPoint = Literal["after-propose", "after-approve", "after-claim", "during-side-effect"]
CRASH_POINTS: tuple[str, ...] = get_args(CrashPoint)
TOOL = "create_customer"
SCHEMA_HASH = "schema-v1"
OWNER = "crash-agent"
APPROVER = "operator@example.com"


def _emit(line: str) -> None:
    """Print one line and flush it, so the parent can read it while we keep running."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _barrier() -> None:
    """Announce readiness, then wait for the test's go line on stdin."""
    _emit("ready")
    if not sys.stdin.readline():
        raise SystemExit("stdin closed before the go signal")


def _block_forever(point: str) -> NoReturn:
    """Tell the test we reached ``point`` and wait to be killed."""
    _emit(f"crash-point {point}")
    while True:
        signal.pause()


def run_side_effect(side_effect_file: Path, proposal_id: str) -> None:
    """The outside world's record of the tool running: one durable line per execution."""
    with side_effect_file.open("a", encoding="utf-8") as handle:
        handle.write(f"{TOOL} {proposal_id}\n")
        handle.flush()
        os.fsync(handle.fileno())


def _error(error: LedgerError) -> dict[str, Any]:
    """A JSON description of a ledger refusal, message included."""
    return {"code": error.code, "message": str(error), "details": error.to_dict().get("details")}


def claim(url: str, worker: str, ids_file: Path, seed: int) -> dict[str, Any]:
    """Try to claim every listed ``[proposal_id, args_hash]``; report wins and losses.

    A negative ``seed`` keeps the listed order (racers in lockstep collide on every proposal);
    otherwise the order is shuffled with that seed (collisions anywhere, wins spread out).
    """
    targets: list[list[str]] = json.loads(ids_file.read_text())
    if seed >= 0:
        random.Random(seed).shuffle(targets)
    identity = ExecutorIdentity.current(worker)
    claimed: list[str] = []
    refused: dict[str, int] = {}
    with SQLModelProvider(url) as provider:
        ledger = provider.ledger
        ledger.head()  # open a connection before the barrier
        _barrier()
        for proposal_id, args_hash in targets:
            try:
                ledger.claim(proposal_id, args_hash, executor=identity)
            except LedgerError as error:
                refused[error.code] = refused.get(error.code, 0) + 1
            else:
                claimed.append(proposal_id)
    return {"worker": worker, "pid": os.getpid(), "claimed": claimed, "refused": refused}


def decide(url: str, approver: str, action: str, ids_file: Path) -> dict[str, Any]:
    """Approve or reject every listed proposal in order; report wins and the losers' errors."""
    proposal_ids: list[str] = json.loads(ids_file.read_text())
    won: list[str] = []
    lost: dict[str, dict[str, Any]] = {}
    with SQLModelProvider(url) as provider:
        ledger = provider.ledger
        ledger.head()
        decide_one = ledger.approve if action == "approve" else ledger.reject
        _barrier()
        for proposal_id in proposal_ids:
            try:
                decide_one(proposal_id, approver, f"{action} by {approver}", via="cli")
            except LedgerError as error:
                lost[proposal_id] = _error(error)
            else:
                won.append(proposal_id)
    return {"approver": approver, "action": action, "won": won, "lost": lost}


def put_blob(url: str, content_file: Path) -> dict[str, Any]:
    """Store one blob after the barrier; report its digest or the error."""
    content = content_file.read_bytes()
    with SQLModelProvider(url) as provider:
        ledger = provider.ledger
        ledger.head()
        _barrier()
        try:
            blob = ledger.put_blob(content, "text/plain")
        except Exception as error:  # any failure is the finding this command reports
            return {"ok": False, "error": f"{type(error).__name__}: {error}"}
    return {"ok": True, "sha256": blob.sha256}


def crash(url: str, point: str, side_effect_file: Path) -> None:
    """Walk one proposal through its life and block at ``point`` to be SIGKILLed there."""
    if point not in CRASH_POINTS:
        raise SystemExit(f"unknown crash point {point!r}; one of {CRASH_POINTS}")
    provider = SQLModelProvider(url)
    ledger = provider.ledger
    proposal = ledger.propose(
        TOOL, SCHEMA_HASH, {"name": "Ada", "email": "ada@example.com"},
        owner=OWNER, user="bob", thread_id="thread-crash", policy_reason="creates a customer",
    )  # fmt: skip
    _emit(f"proposed {proposal.proposal_id}")
    if point == "after-propose":
        _block_forever(point)
    ledger.approve(proposal.proposal_id, APPROVER, "reviewed", via="cli")
    if point == "after-approve":
        _block_forever(point)
    ledger.claim(proposal.proposal_id, proposal.args_hash, executor="crash-executor")
    if point == "after-claim":
        _block_forever(point)
    run_side_effect(side_effect_file, proposal.proposal_id)
    _block_forever(point)


def _all_proposals(ledger: ApprovalLedger) -> list[Any]:
    """Every proposal in the ledger, walking the keyset pages."""
    found: list[Any] = []
    cursor: str | None = None
    while True:
        page = ledger.list(limit=500, cursor=cursor)
        found.extend(page.items)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def restart(url: str, side_effect_file: Path) -> dict[str, Any]:
    """What a resumer does after a crash: recover, then run approved work and nothing else.

    Every proposal gets a claim attempt: approved ones run (claim, side effect, complete);
    for the rest the ledger must refuse, and the refusal code is reported.
    """
    ran: list[str] = []
    refused: dict[str, str] = {}
    with SQLModelProvider(url) as provider:
        ledger = provider.ledger
        recovered = [execution.proposal_id for execution in ledger.recover()]
        for proposal in _all_proposals(ledger):
            try:
                ledger.claim(proposal.proposal_id, proposal.args_hash, executor="restarter")
            except LedgerError as error:
                refused[proposal.proposal_id] = error.code
                continue
            run_side_effect(side_effect_file, proposal.proposal_id)
            ledger.complete(proposal.proposal_id, "success", executor="restarter")
            ran.append(proposal.proposal_id)
        statuses = {p.proposal_id: ProposalStatus(p.status).value for p in _all_proposals(ledger)}
        report = ledger.verify()
    return {
        "recovered": recovered,
        "ran": ran,
        "refused": refused,
        "statuses": statuses,
        "audit_ok": report.ok,
        "audit_checked": report.checked,
    }


def main(argv: list[str]) -> int:
    """Dispatch one command; print its JSON result as the last stdout line."""
    command, url, *rest = argv
    result: dict[str, Any]
    if command == "claim":
        result = claim(url, rest[0], Path(rest[1]), int(rest[2]))
    elif command == "decide":
        result = decide(url, rest[0], rest[1], Path(rest[2]))
    elif command == "put-blob":
        result = put_blob(url, Path(rest[0]))
    elif command == "crash":
        crash(url, rest[0], Path(rest[1]))
        return 1  # unreachable: crash blocks until killed
    elif command == "restart":
        result = restart(url, Path(rest[0]))
    else:
        raise SystemExit(f"unknown command {command!r}")
    _emit(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
