"""How long trace events are kept, and how far ``extend`` may push an expiry.

Trace events (every model call, tool call and result) grow without bound on a busy ledger.
:class:`TraceRetention` keeps at most ``max_events`` of them and none older than
``max_age_seconds``; the writer prunes on a cadence (every ``prune_every`` appended events, at
most ``batch`` per pass) and ``supervisor traces prune`` prunes on demand. Events of a thread
that still has a live proposal (pending, approved, executing, needs_reconciliation) are never
pruned: they are that proposal's evidence.

:class:`ExtendLimits` caps a proposal's total lifetime (expiry minus creation), so a stray or
hostile ``extend`` cannot keep an approval alive for years.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

DAY_SECONDS = 24 * 3600.0


class TraceRetention(BaseModel):
    """The trace retention policy of one ledger handle.

    Attributes:
        max_age_seconds: Events older than this are pruned (``None``: no age limit).
        max_events: At most this many events are kept, newest first, besides those of live
            proposals' threads (``None``: no count limit).
        prune_every: The writer prunes after this many appended events (0: never on its own).
        batch: At most this many events are deleted per cadence pass, so a pass stays short.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_age_seconds: float | None = Field(
        default=30 * DAY_SECONDS, gt=0, le=100 * 365 * DAY_SECONDS, allow_inf_nan=False
    )
    max_events: int | None = Field(default=1_000_000, ge=1)
    prune_every: int = Field(default=10_000, ge=0)
    batch: int = Field(default=20_000, ge=1)


class ExtendLimits(BaseModel):
    """How far ``extend`` may push a proposal's expiry.

    A proposal's lifetime (expiry minus creation) may grow to ``max_factor`` times the
    original TTL (the TTL the first proposal of its supersede chain was proposed with, so an
    edit does not reset it), and never past ``max_lifetime_seconds``; a lifetime can always
    reach the original TTL itself. With the defaults a 60-second approval can live 24 minutes, an
    hour-long one a day, and none longer than 7 days.

    Attributes:
        max_factor: The lifetime cap as a multiple of the original TTL.
        max_lifetime_seconds: The absolute ceiling on a lifetime.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_factor: float = Field(default=24.0, ge=1, le=10_000, allow_inf_nan=False)
    max_lifetime_seconds: float = Field(
        default=7 * DAY_SECONDS, gt=0, le=100 * 365 * DAY_SECONDS, allow_inf_nan=False
    )

    def max_lifetime(self, original_ttl_seconds: float) -> float:
        """The longest lifetime, in seconds, of a proposal proposed with that TTL."""
        ttl = original_ttl_seconds if math.isfinite(original_ttl_seconds) else 0.0
        return max(ttl, min(ttl * self.max_factor, self.max_lifetime_seconds))
