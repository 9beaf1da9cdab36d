"""A ledger of this process on a URL with the real clock, for tests where other processes
write (they read the same time), closed and its engine disposed afterwards."""

from __future__ import annotations

from collections.abc import Iterator

from supervisor.ledger.service import ApprovalLedger
from supervisor.store.engine import create_ledger_engine


def open_ledger(url: str) -> Iterator[ApprovalLedger]:
    """Yield an ``ApprovalLedger`` on ``url`` (``yield from`` it in a fixture)."""
    engine = create_ledger_engine(url)
    ledger = ApprovalLedger(engine)
    try:
        yield ledger
    finally:
        ledger.close()
        engine.dispose()
