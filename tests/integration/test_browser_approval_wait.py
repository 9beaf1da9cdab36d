"""How long the browser gate waits for a decision: until the proposal's expiry as the ledger
has it now (an operator's ``extend`` included), never past the longest lifetime an extension
can give it.

The gate is driven without Chromium (its wait needs none) on a real SQLite ledger, with an
operator deciding from another thread through its own ledger handle, as the TUI would.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from sandboxes.browser.gate import ApprovalGate
from sandboxes.browser.policy import BrowserPolicy
from supervisor.ledger import ManualClock
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.ledger.retention import ExtendLimits
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.engine import create_ledger_engine

LedgerFactory = Callable[[ManualClock | None], ApprovalLedger]


@pytest.fixture
def open_ledger(sqlite_url: str) -> Iterator[LedgerFactory]:
    """Opens ledger handles on one SQLite file (the worker's, the operator's); closes them."""
    opened: list[tuple[ApprovalLedger, Engine]] = []

    def open_one(clock: ManualClock | None = None) -> ApprovalLedger:
        engine = create_ledger_engine(sqlite_url)
        opened.append((ApprovalLedger(engine, clock), engine))
        return opened[-1][0]

    yield open_one
    for handle, engine in opened:
        handle.close()
        engine.dispose()


def _gate(ledger: ApprovalLedger, approval_timeout: float) -> ApprovalGate:
    policy = BrowserPolicy(allowed_domains=("127.0.0.1",))
    return ApprovalGate(ledger, policy, worker_id="w1", approval_timeout=approval_timeout)


def _propose(gate: ApprovalGate) -> Proposal:
    """A proposal filed as the gate files one (TTL = ``approval_timeout``)."""
    return gate.ledger.propose(
        "browser.click", "0" * 64, {"index": 1}, domains=("browser",),
        ttl_seconds=gate.approval_timeout,
    )  # fmt: skip


def _in_thread(work: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_an_extended_proposal_keeps_the_gate_waiting_past_its_original_expiry(
    open_ledger: LedgerFactory,
) -> None:
    worker, operator = open_ledger(None), open_ledger(None)
    gate = _gate(worker, approval_timeout=2.0)
    proposal = _propose(gate)
    operator_errors: list[Exception] = []

    def operator_extends_then_approves_late() -> None:
        try:
            operator.extend(proposal.proposal_id, 30, "operator", "need to check with finance")
            # Decide only once the original expiry (and the gate's approval_timeout) are past.
            left = (proposal.expires_at - operator.clock.now()).total_seconds()
            time.sleep(left + 1.5)
            operator.approve(proposal.proposal_id, "operator", "checked")
        except Exception as exc:
            operator_errors.append(exc)

    deciding = _in_thread(operator_extends_then_approves_late)
    decided = asyncio.run(gate._wait(proposal))
    deciding.join(timeout=30)

    assert operator_errors == []
    assert decided.status is ProposalStatus.APPROVED, decided.decision_reason
    assert decided.decided_at is not None and decided.decided_at > proposal.expires_at


def test_an_extended_proposal_is_withdrawn_at_its_new_expiry(open_ledger: LedgerFactory) -> None:
    worker, operator = open_ledger(None), open_ledger(None)
    gate = _gate(worker, approval_timeout=1.0)
    proposal = _propose(gate)
    extended = operator.extend(proposal.proposal_id, 2, "operator")

    decided = asyncio.run(gate._wait(proposal))

    assert decided.status is ProposalStatus.CANCELLED
    assert decided.decision_reason == "no decision in time"
    assert decided.decided_at is not None and decided.decided_at >= extended.expires_at


def test_the_gate_waits_no_longer_than_the_longest_default_extension(
    open_ledger: LedgerFactory,
) -> None:
    clock = ManualClock()
    worker, operator = open_ledger(clock), open_ledger(clock)
    operator.extend_limits = ExtendLimits(max_factor=1000)  # an operator with looser limits
    gate = _gate(worker, approval_timeout=10.0)
    assert gate.longest_wait == 240.0  # 24 times the TTL (the default ExtendLimits)
    proposal = _propose(gate)
    operator.extend(proposal.proposal_id, 1000, "operator")
    result: list[Proposal] = []
    waiting = _in_thread(lambda: result.append(asyncio.run(gate._wait(proposal))))

    clock.advance(200)  # past the original expiry, inside the longest wait: still waiting
    waiting.join(timeout=2.5)
    assert waiting.is_alive()
    clock.advance(41)  # past created_at + longest_wait, long before the extended expiry
    waiting.join(timeout=30)

    (decided,) = result
    assert decided.status is ProposalStatus.CANCELLED
    assert decided.decided_at == proposal.created_at + timedelta(seconds=241)
