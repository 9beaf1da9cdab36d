"""Injectable clocks: the ledger never reads the wall clock directly.

Tests pass a :class:`ManualClock` and move time with :meth:`ManualClock.advance` instead of
sleeping; production code uses :class:`SystemClock`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Anything that can tell the current time as a timezone-aware UTC datetime."""

    def now(self) -> datetime:
        """Return the current time (UTC, tz-aware)."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to; for tests.

    Args:
        start: The initial time; naive values are taken as UTC. Defaults to 2030-01-01 UTC.
    """

    def __init__(self, start: datetime | None = None) -> None:
        initial = start or datetime(2030, 1, 1, tzinfo=UTC)
        self._now = as_utc(initial)

    def now(self) -> datetime:
        """Return the clock's current time."""
        return self._now

    def advance(self, seconds: float) -> datetime:
        """Move the clock forward by ``seconds`` and return the new time.

        Raises:
            ValueError: ``seconds`` is negative (time never goes backwards).
        """
        if seconds < 0:
            raise ValueError("A ManualClock only moves forward.")
        self._now = self._now + timedelta(seconds=seconds)
        return self._now

    def set(self, moment: datetime) -> None:
        """Jump to ``moment`` (naive values are taken as UTC)."""
        self._now = as_utc(moment)


def as_utc(moment: datetime) -> datetime:
    """Return ``moment`` as a tz-aware UTC datetime; naive values are taken as UTC."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
