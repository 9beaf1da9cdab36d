"""Change feed, audit verification and retention."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from supervisor.canonical import canonical_json
from supervisor.ledger.base import LedgerBase
from supervisor.ledger.errors import LedgerBusy, LedgerUnavailable
from supervisor.ledger.models import (
    TERMINAL_STATUSES,
    AuditRecord,
    Execution,
    Proposal,
    PurgeReport,
)
from supervisor.ledger.verify import (
    DEFAULT_MAX_FINDINGS,
    Anchor,
    ChainHead,
    LedgerReport,
    verify_ledger,
)
from supervisor.store.notify import ChangeProbe
from supervisor.store.repository import LedgerTx

FALLBACK_POLL_S = 1.0
"""Re-read the feed at least this often even without a wake-up (lost NOTIFY, odd filesystems)."""
RETRY_S = 0.25
"""Pause between attempts while the ledger cannot be reached (a server restart)."""
_BATCH = 2000


class FeedMixin(LedgerBase):
    """Readers follow the audit seq; writers wake them (data_version or NOTIFY)."""

    _probe: ChangeProbe | None = None
    _probe_lock: threading.Lock | None = None

    def events_since(self, cursor: int = 0, limit: int = 500) -> list[AuditRecord]:
        """Audit records after ``cursor`` (an audit seq), oldest first.

        Args:
            cursor: The last seq the reader has seen (0 for the beginning).
            limit: The most records to return.

        Returns:
            Up to ``limit`` records; the last one's ``seq`` is the next cursor.
        """
        with self.repository.read() as tx:
            return tx.audit_after(cursor, limit)

    def audit_of(self, subject: str) -> list[AuditRecord]:
        """Every audit record about ``subject`` (a proposal id), oldest first: one indexed
        read (``ix_audit_subject``), however long the log."""
        with self.repository.read() as tx:
            return tx.audit_of(subject)

    def head(self) -> int:
        """The newest audit seq (0 for an empty ledger); a cursor that skips history."""
        with self.repository.read() as tx:
            return tx.audit_tip()

    def chain_head(self) -> ChainHead:
        """The newest audit record's seq and hash: keep it outside the ledger as an anchor.

        ``verify(anchor=...)`` later fails unless the chain still holds that hash at that seq,
        so a chain rewritten from scratch, or cut back past the anchor, is detected.
        """
        with self.repository.read() as tx:
            seq, digest = tx.audit_head()
        return ChainHead(seq=seq, hash=digest)

    def _get_probe(self) -> tuple[ChangeProbe, threading.Lock]:
        if self._probe_lock is None:
            self._probe_lock = threading.Lock()
        if self._probe is None:
            self._probe = self.repository.change_probe()
        return self._probe, self._probe_lock

    def wait_for_change(self, cursor: int, timeout: float, limit: int = 500) -> list[AuditRecord]:
        """Block until the ledger has records after ``cursor`` or ``timeout`` seconds pass.

        SQLite polls ``PRAGMA data_version`` every 20 ms; PostgreSQL waits for a NOTIFY sent in
        the committing transaction. Either way the feed is re-read at least every second.
        While the ledger cannot be reached (a PostgreSQL restart) the wait keeps retrying
        until ``timeout`` instead of failing: a follower rides out the restart, reconnects its
        listener and re-reads by cursor, so nothing committed meanwhile is missed.

        Returns:
            The new records (empty on timeout, also if the ledger stayed unreachable).
        """
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            try:
                records, reachable = self.events_since(cursor, limit), True
            except (LedgerBusy, LedgerUnavailable):
                records, reachable = [], False
            remaining = deadline - time.monotonic()
            if records or remaining <= 0:
                return records
            if not (reachable and self._wait_on_probe(min(remaining, FALLBACK_POLL_S))):
                time.sleep(min(remaining, RETRY_S))

    def _wait_on_probe(self, timeout: float) -> bool:
        """Wait on the change probe; ``False`` if the ledger could not be reached."""
        try:
            probe, lock = self._get_probe()
        except (LedgerBusy, LedgerUnavailable):
            return False
        if not lock.acquire(timeout=timeout):
            return True
        try:
            probe.wait(timeout)
        except (LedgerBusy, LedgerUnavailable):
            return False
        finally:
            lock.release()
        return True

    def close(self) -> None:
        """Release the change-feed connection (the engine is the caller's)."""
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    def verify(
        self, anchor: Anchor | str | None = None, *, max_findings: int = DEFAULT_MAX_FINDINGS
    ) -> LedgerReport:
        """Recompute the audit hash chain and replay it against every proposal and execution.

        Reads the chain and the rows in one snapshot. Reports every proposal row whose status,
        args hash, arguments, expiry, approver, supersede links, owner, user, thread, domains,
        risk, target or claims the chain does not explain, every execution row whose state,
        args hash, executor, outcome status or result reference it does not explain, every
        policy version its ``policy_apply`` records do not explain (a ledger that holds
        proposals but no audit records fails), and, with ``anchor``, fails unless the chain
        still holds that hash (at that seq, if given).

        Args:
            anchor: A head kept outside the ledger (:meth:`chain_head`), as ``HASH``,
                ``SEQ:HASH`` or an :class:`Anchor`.
            max_findings: How many findings the report lists (all are counted).

        Returns:
            ``ok``, the chain's count checked or first broken seq and why, the findings.

        Raises:
            InvalidAnchor: ``anchor`` is not a hash or ``SEQ:HASH``.
        """
        parsed = Anchor.parse(anchor) if isinstance(anchor, str) else anchor
        with self.repository.read(snapshot=True) as tx:
            return verify_ledger(
                _iter_audit(tx), _iter_rows(tx), policy_rows=tx.policy_rows(), anchor=parsed,
                max_findings=max_findings,
            )  # fmt: skip

    def purge(
        self,
        older_than_days: float,
        archive_path: str | Path | None = None,
        *,
        actor: str = "retention",
        batch: int = 500,
    ) -> PurgeReport:
        """Delete terminal proposals last changed more than ``older_than_days`` ago.

        Pending, approved, executing and needs_reconciliation proposals are never purged. The
        audit log is kept whole (the chain stays verifiable) and records each purge.

        Args:
            older_than_days: Age threshold in days.
            archive_path: If given, each purged proposal (with its execution) is appended to
                this JSON-lines file (mode 0600) before it is deleted.
            actor: Recorded as the purge's actor.
            batch: Proposals per transaction.

        Returns:
            How many proposals were purged and their ids.
        """
        cutoff = self._now() - timedelta(days=older_than_days)
        purged: list[str] = []
        statuses = sorted(TERMINAL_STATUSES)
        while True:
            with self.repository.write() as tx:
                victims = tx.proposals_terminal_before(statuses, cutoff, batch)
                if not victims:
                    break
                ids = [proposal.proposal_id for proposal in victims]
                if archive_path is not None:
                    lines = []
                    for proposal in victims:
                        execution = tx.execution(proposal.proposal_id)
                        lines.append(
                            canonical_json(
                                {
                                    "proposal": json.loads(proposal.model_dump_json()),
                                    "execution": json.loads(execution.model_dump_json())
                                    if execution
                                    else None,
                                }
                            )
                        )
                    _append_private(Path(archive_path), lines)
                tx.delete_proposals(ids)
                tx.append_audit(
                    at=self._now(),
                    actor=actor,
                    action="purge",
                    subject="retention",
                    payload={
                        "proposal_ids": ids,
                        "older_than_days": older_than_days,
                        "archive": str(archive_path) if archive_path else None,
                    },
                )
                purged.extend(ids)
            if len(victims) < batch:
                break
        return PurgeReport(
            purged=len(purged),
            proposal_ids=tuple(purged),
            archive_path=str(archive_path) if archive_path else None,
        )


def _iter_audit(tx: LedgerTx) -> Iterator[AuditRecord]:
    """Every audit record, ascending seq, read in batches inside ``tx``."""
    seq = 0
    while records := tx.audit_after(seq, _BATCH):
        yield from records
        seq = records[-1].seq


def _iter_rows(tx: LedgerTx) -> Iterator[tuple[Proposal, Execution | None]]:
    """Every proposal with its execution, ascending id, read in batches inside ``tx``."""
    after = ""
    while rows := tx.proposals_with_executions(after, _BATCH):
        yield from rows
        after = rows[-1][0].proposal_id


def _append_private(path: Path, lines: list[str]) -> None:
    """Append lines to a 0600 file and fsync before the rows are deleted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, "".join(line + "\n" for line in lines).encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
