"""Leases and proposal waiters: who is alive, who waits on what, who may continue a turn.

A lease is a row naming a resource, its holder and a deadline; the holder renews it while it
works and releases it when done. Acquiring takes a free lease, renews one's own, or takes over
one whose deadline passed (its holder died) - each by one conditional statement, so two racing
processes never both hold it. Processes hold their lease on their process row (renewed by the
heartbeat, see ``registry.py``); the ``proposal_waiter`` rows say which process waits on which
proposal, so "is the process waiting on this proposal alive?" is one query
(:meth:`LeaseServiceMixin.waiter_alive`), and a pending or approved proposal whose waiter is gone
is **orphaned**.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta

from supervisor.ledger.base import LedgerBase
from supervisor.ledger.errors import LeaseHeld
from supervisor.ledger.models import WAITED_STATUSES, Lease, Proposal, ProposalWaiter


class LeaseServiceMixin(LedgerBase):
    """Lease acquisition, renewal and release; proposal waiters and orphans."""

    # leases ------------------------------------------------------------------------------
    def acquire_lease(self, resource: str, holder: str, seconds: float | None = None) -> Lease:
        """Hold ``resource`` for ``seconds`` (default :attr:`lease_seconds`).

        Free, already ``holder``'s, or past its deadline: the lease becomes ``holder``'s (a
        takeover names the previous holder in ``taken_over_from``).

        Raises:
            LeaseHeld: Another holder's lease on it has not reached its deadline.
        """
        now = self._now()
        lease = Lease(
            resource=resource,
            holder=holder,
            acquired_at=now,
            expires_at=now + timedelta(seconds=seconds or self.lease_seconds),
        )
        with self.repository.write() as tx:
            current = tx.lease(resource)
            if current is None:
                tx.insert_lease(lease)
                return lease
            if current.holder != holder and current.expires_at >= now:
                raise LeaseHeld(resource, holder=current.holder, until=current.expires_at)
            if not tx.take_lease(current, lease):  # serialised writers: cannot happen
                raise LeaseHeld(resource, holder=current.holder, until=current.expires_at)
        if current.holder == holder:
            return lease
        return lease.model_copy(update={"taken_over_from": current.holder})

    def renew_lease(self, resource: str, holder: str, seconds: float | None = None) -> bool:
        """Move the deadline of a lease ``holder`` holds; False once another holder took it.

        A renewal that comes late still lands while nobody took the lease over.
        """
        until = self._now() + timedelta(seconds=seconds or self.lease_seconds)
        with self.repository.write() as tx:
            return tx.renew_lease(resource, holder, until)

    def release_lease(self, resource: str, holder: str) -> bool:
        """Give up a lease at once; False if ``holder`` no longer held it."""
        with self.repository.write() as tx:
            return tx.delete_lease(resource, holder)

    def get_lease(self, resource: str) -> Lease | None:
        """The lease on ``resource`` (possibly past its deadline), or ``None``."""
        with self.repository.read() as tx:
            return tx.lease(resource)

    # waiters -----------------------------------------------------------------------------
    def record_waiters(self, process_id: str, proposal_ids: Sequence[str]) -> None:
        """Record that the process ``process_id`` waits on these proposals to go on."""
        with self.repository.write() as tx:
            tx.set_waiters(process_id, proposal_ids, self._now())

    def waiters(self, proposal_ids: Iterable[str]) -> dict[str, ProposalWaiter]:
        """The recorded waiter of each proposal that has one, with its liveness now."""
        now = self._now()
        with self.repository.read() as tx:
            found = tx.waiters(list(proposal_ids))
        return {
            proposal_id: ProposalWaiter(
                proposal_id=proposal_id,
                process_id=process_id,
                since=since,
                process=process,
                alive=process is not None and process.alive_at(now),
            )
            for proposal_id, process_id, since, process in found
        }

    def waiter_alive(self, proposal_id: str) -> bool | None:
        """Is the process waiting on this proposal alive?

        Returns:
            True or False for a proposal with a recorded waiter, ``None`` when no process
            was recorded as waiting on it (e.g. it was proposed by a plain SDK script).
        """
        waiter = self.waiters([proposal_id]).get(proposal_id)
        return None if waiter is None else waiter.alive

    def orphans(self, proposals: Iterable[Proposal]) -> dict[str, ProposalWaiter]:
        """Of ``proposals``, those still pending or approved whose waiting process is gone."""
        waited = [p.proposal_id for p in proposals if p.status in WAITED_STATUSES]
        if not waited:
            return {}
        return {pid: waiter for pid, waiter in self.waiters(waited).items() if not waiter.alive}
