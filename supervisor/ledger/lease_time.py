"""How long leases last and how often their holders renew them.

A lease is the ledger's proof that a process is alive: its holder renews it on every heartbeat,
and a lease past its deadline means the holder is gone (``lost``). The length is the holder's:
it writes its own deadline, so readers need no configuration to judge it.
``SUPERVISOR_LEASE_SECONDS`` shortens it (tests, a supervisor that must notice crashes fast);
renewals happen at least three times per lease so one slow write is never taken for a death.
"""

from __future__ import annotations

import math
import os

from supervisor.errors import SupervisorError
from supervisor.ledger.models import LOST_AFTER_SECONDS

LEASE_ENV = "SUPERVISOR_LEASE_SECONDS"
#: The default lease: as long as the heartbeat deadline of a process without one (60 s).
DEFAULT_LEASE_SECONDS = LOST_AFTER_SECONDS
#: Renewals per lease length: a holder renews at least this often within one lease.
RENEWALS_PER_LEASE = 3


class InvalidLeaseSeconds(SupervisorError, ValueError):
    """``SUPERVISOR_LEASE_SECONDS`` is not a positive number of seconds."""

    code = "invalid_lease_seconds"


def lease_seconds_from_env() -> float:
    """The lease length from ``SUPERVISOR_LEASE_SECONDS`` (default 60 s).

    Raises:
        InvalidLeaseSeconds: The variable is set to something other than a positive number.
    """
    raw = os.environ.get(LEASE_ENV, "").strip()
    if not raw:
        return DEFAULT_LEASE_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidLeaseSeconds(
            f"{LEASE_ENV}={raw!r} is not a positive number of seconds.",
            hint=f"Unset {LEASE_ENV} for the default ({DEFAULT_LEASE_SECONDS:g} s) or give "
            "e.g. 10.",
        )
    return seconds


def renew_every(lease_seconds: float, at_most: float) -> float:
    """The renewal interval for a lease: ``at_most``, or a third of the lease if shorter."""
    return min(at_most, lease_seconds / RENEWALS_PER_LEASE)
