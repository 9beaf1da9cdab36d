"""One turn, one runner: the lease on a paused checkpoint while a process continues it.

Continuing a paused turn calls the model. Two processes resuming the same thread at once (two
``resume_approval`` calls, say, one per proposal of the turn, or the same rejected proposal
twice) would both call it, so the continuation runs under the lease ``turn:<checkpoint id>``.
The holder renews it while the model works and releases it when the turn is saved; a second
resumer waits for it. When the holder finishes, the thread has a newer checkpoint and the second
resumer has nothing left to continue; when the holder dies (SIGKILL, a lost host), its lease
runs out and the second resumer takes the turn over after that deadline.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from supervisor.ledger.errors import LeaseHeld, LedgerError
from supervisor.ledger.lease_time import renew_every
from supervisor.ledger.models import Lease
from supervisor.ledger.service import ApprovalLedger

#: How often a holder renews its turn lease at most (a third of the lease when shorter).
RENEW_SECONDS = 2.0
#: How often a waiting resumer looks at the lease again.
POLL_SECONDS = 0.1


def turn_resource(checkpoint_id: str) -> str:
    """The lease name of a paused checkpoint's turn."""
    return f"turn:{checkpoint_id}"


def holder_name() -> str:
    """A holder label naming this process and this resume (unique per call)."""
    return f"pid {os.getpid()}@{socket.gethostname()}#{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class TurnWait:
    """What a resumer found: the lease it holds, or who held the turn when it gave up."""

    lease: Lease | None
    holder: str | None = None


def keep_renewed(ledger: ApprovalLedger, lease: Lease, stop: threading.Event) -> None:
    """Renew ``lease`` until ``stop`` is set or another holder took it over."""
    every = renew_every(ledger.lease_seconds, RENEW_SECONDS)
    while not stop.wait(every):
        try:
            if not ledger.renew_lease(lease.resource, lease.holder):
                return  # expired and taken over: the taker runs the turn from its checkpoint
        except LedgerError:
            continue  # a busy ledger: the next renewal retries within the lease


@contextmanager
def turn_lease(
    ledger: ApprovalLedger,
    checkpoint_id: str,
    *,
    moved_on: Callable[[], bool],
    wait_seconds: float | None = None,
) -> Iterator[TurnWait]:
    """Hold the turn lease of ``checkpoint_id`` for the block, renewed in a thread.

    Waits while another live holder has it: until it is released, its deadline passes (taken
    over), ``moved_on()`` says the thread has a newer checkpoint (nothing left to continue), or
    ``wait_seconds`` (default three leases) pass. The block gets a :class:`TurnWait` whose
    ``lease`` is ``None`` when the turn is not this resumer's to run.
    """
    resource = turn_resource(checkpoint_id)
    holder = holder_name()
    give_up = time.monotonic() + (
        wait_seconds if wait_seconds is not None else 3 * ledger.lease_seconds
    )
    while True:
        current = ledger.get_lease(resource)  # a read: waiting takes no write lock
        seen = current.holder if current is not None else None
        if current is None or current.expires_at < ledger.clock.now():
            try:
                lease = ledger.acquire_lease(resource, holder)
                break
            except LeaseHeld as held:
                seen = held.holder
        if moved_on() or time.monotonic() >= give_up:
            yield TurnWait(None, seen)
            return
        time.sleep(POLL_SECONDS)
    stop = threading.Event()
    keeper = threading.Thread(target=keep_renewed, args=(ledger, lease, stop), daemon=True,
                              name="turn-lease")  # fmt: skip
    keeper.start()
    try:
        yield TurnWait(lease)
    finally:
        stop.set()
        keeper.join(timeout=5)
        try:
            ledger.release_lease(resource, holder)
        except LedgerError:
            pass  # unreleased, it runs out at its deadline
