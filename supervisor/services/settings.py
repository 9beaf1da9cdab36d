"""Settings of one supervisor instance (UI and headless services alike)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from supervisor.ledger.clock import SystemClock
from supervisor.services.notify import CHANNELS


def _system_now() -> datetime:
    return SystemClock().now()


@dataclass(frozen=True)
class SupervisorSettings:
    """What a supervisor instance needs to know besides the ledger.

    Attributes:
        db_url: SQLAlchemy URL of the ledger; ``None`` means the default ledger.
        high_risk_domains: Domains whose approvals need a second confirmation.
        trace_capacity: Most trace events kept in memory by the live trace.
        extend_seconds: How far one "extend expiry" pushes a proposal's expiry.
        expiry_warning_seconds: Warn when a pending proposal expires sooner than this.
        poll_timeout: Seconds a background reader waits on the change feed per round.
        inbox_first_page: Pending proposals read before the inbox is first shown.
        inbox_page: Pending proposals read per page after the first one.
        inbox_interval: Least seconds between two reads of the change feed for the inbox
            while changes keep coming: a lone change is shown at once, a stream of them in
            batches, so a busy ledger redraws the inbox and the detail a few times a second,
            not once per change.
        decision_settle_seconds: How long a proposal's arguments must have been on screen in
            full when an approve or edit key arrives, so a key meant for one proposal never
            decides another that moved under the cursor (a row decided elsewhere vanishing, keys
            queued while the screen lagged).
        notify: Channels that say a run is blocked on the operator (:mod:`.notify`).
        webhooks: Send the ledger's webhook events from this instance too (:mod:`.webhooks`).
        now: The clock used for countdowns and heartbeat ages (tests fix it).
    """

    db_url: str | None = None
    high_risk_domains: frozenset[str] = frozenset({"payments", "production", "admin"})
    trace_capacity: int = 5_000
    extend_seconds: float = 3600.0
    expiry_warning_seconds: float = 300.0
    poll_timeout: float = 0.5
    inbox_first_page: int = 200
    inbox_page: int = 1_000
    inbox_interval: float = 0.1
    decision_settle_seconds: float = 0.5
    notify: frozenset[str] = frozenset(CHANNELS)
    webhooks: bool = True
    now: Callable[[], datetime] = field(default=_system_now)
