"""Change feed, audit verification and retention."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
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
from supervisor.store.notify import ALL_CHANNELS, CHANNEL, ChangeBoard, Interest, channels_for
from supervisor.store.repository import LedgerTx

FALLBACK_POLL_S = 1.0
"""Re-read the feed at least this often even without a wake-up (lost NOTIFY, odd filesystems)."""
RETRY_S = 0.25
"""Pause between attempts while the ledger cannot be reached (a server restart)."""
_BATCH = 2000
_BOARD_LOCK = threading.Lock()


@dataclass(frozen=True)
class FeedPage:
    """What :meth:`FeedMixin.follow` read: the matching records and the next cursor."""

    records: list[AuditRecord]
    cursor: int
    """The seq read through (at or past the last record's)."""
    mark: int = 0
    """The change board's position taken before the read."""
    read_at: float = 0.0
    """When the read was made (``time.monotonic``)."""
    caught_up: bool = False
    """The read reached the tip (it was not cut short by ``limit``)."""
    checked: int = 0
    """The board position through which no notice after ``mark`` matched ``checked_for``."""
    checked_for: tuple[frozenset[str] | None, frozenset[str] | None] | None = None
    """The ``(actions, subjects)`` followed when the board was checked through ``checked``."""


def _matches_less(
    wanted: tuple[frozenset[str] | None, frozenset[str] | None],
    checked_for: tuple[frozenset[str] | None, frozenset[str] | None] | None,
) -> bool:
    """Whether every record ``wanted`` matches was matched by ``checked_for`` too: then the
    notices already checked against ``checked_for`` need no second look."""
    if checked_for is None:
        return False
    return all(
        old is None or (new is not None and new <= old)
        for new, old in zip(wanted, checked_for, strict=True)
    )


class FeedMixin(LedgerBase):
    """Readers follow the audit seq; writers wake them (data_version or NOTIFY)."""

    _board: ChangeBoard | None = None

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

    def _get_board(self) -> ChangeBoard:
        with _BOARD_LOCK:
            if self._board is None:
                # The board adds the channels its followers need as they first wait.
                self._board = ChangeBoard(self.repository.change_probe(CHANNEL))
            return self._board

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
            mark = self._mark()
            try:
                records, reachable = self.events_since(cursor, limit), True
            except (LedgerBusy, LedgerUnavailable):
                records, reachable = [], False
            remaining = deadline - time.monotonic()
            if records or remaining <= 0:
                return records
            if not reachable or self._wait_on_board(mark, min(remaining, FALLBACK_POLL_S)) is None:
                time.sleep(min(remaining, RETRY_S))

    def follow(
        self,
        after: int | FeedPage,
        timeout: float,
        *,
        actions: Collection[str] | None = None,
        subjects: Collection[str] | None = None,
        limit: int = 500,
    ) -> FeedPage:
        """Like :meth:`wait_for_change`, for only some records: those whose action is in
        ``actions`` and whose subject is in ``subjects`` (either ``None``: any).

        The wait ends early only for a matching record: on PostgreSQL each notification names
        its record, so writes to other proposals wake nobody who waits on one, and the feed
        is re-read only when something matched (and at least every second, as any lost
        notification is covered by then). Given the previous page, a call that comes soon
        after it does not even re-read unless a matching notice came since. SQLite cannot tell
        what changed, so there every call reads and every commit re-reads. Only matching
        records are read, but the cursor moves past the others.

        Args:
            after: The previous page (or an audit seq, e.g. :meth:`head`).
            timeout: Seconds to wait for a matching record.
            actions: Audit actions to follow (e.g. ``{"approve"}``).
            subjects: Subjects (proposal ids) to follow.
            limit: The most records to read at once.

        Returns:
            The matching records after ``cursor`` (empty on timeout) and the next cursor.
        """
        wanted_actions = None if actions is None else frozenset(actions)
        wanted_subjects = None if subjects is None else frozenset(subjects)

        def interest(action: str, subject: str) -> bool:
            return (wanted_actions is None or action in wanted_actions) and (
                wanted_subjects is None or subject in wanted_subjects
            )

        wanted = (wanted_actions, wanted_subjects)
        channels = channels_for(wanted_actions)
        deadline = time.monotonic() + max(timeout, 0.0)
        page = after if isinstance(after, FeedPage) else FeedPage(records=[], cursor=after)
        while True:
            now = time.monotonic()
            remaining = deadline - now
            fresh_for = page.read_at + FALLBACK_POLL_S - now
            if page.caught_up and fresh_for > 0:
                # Read through the tip moments ago: wait for a matching notice since, checking
                # only the notices not yet checked for this interest.
                since = page.checked if _matches_less(wanted, page.checked_for) else page.mark
                matched, since = self._watch_board(since, max(0.0, min(remaining, fresh_for)),
                                                   interest, channels)  # fmt: skip
                if matched is False:
                    page = FeedPage(records=[], cursor=page.cursor, mark=page.mark,
                                    read_at=page.read_at, caught_up=True, checked=since,
                                    checked_for=wanted)  # fmt: skip
                    if remaining <= 0:
                        return page
                    continue
                if matched is None:
                    page = FeedPage(records=[], cursor=page.cursor)  # unreachable: read
                    continue
            mark, read_at = self._mark(), time.monotonic()
            try:
                records, cursor, caught_up = self._read_matching(
                    page.cursor, limit, wanted_actions, wanted_subjects
                )
            except (LedgerBusy, LedgerUnavailable):
                time.sleep(max(0.0, min(deadline - time.monotonic(), RETRY_S)))
                if time.monotonic() >= deadline:
                    return FeedPage(records=[], cursor=page.cursor)
                continue
            page = FeedPage(records=records, cursor=cursor, mark=mark, read_at=read_at,
                            caught_up=caught_up)  # fmt: skip
            if records or time.monotonic() >= deadline:
                return page

    def _read_matching(
        self,
        cursor: int,
        limit: int,
        actions: frozenset[str] | None,
        subjects: frozenset[str] | None,
    ) -> tuple[list[AuditRecord], int, bool]:
        """The matching records after ``cursor``, the seq read through and whether that is the
        tip (``LedgerTx.audit_matching_to_tip``: one statement on PostgreSQL)."""
        with self.repository.read() as tx:
            records, through, tip = tx.audit_matching_to_tip(
                cursor, limit,
                actions=None if actions is None else sorted(actions),
                subjects=None if subjects is None else sorted(subjects),
            )  # fmt: skip
            return records, through, through >= tip

    def _mark(self) -> int:
        """The change board's position; 0 before the board is opened (a board opened later
        starts there), so a follower that never waits never holds a listening connection."""
        board = self._board
        return 0 if board is None else board.mark()

    def _wait_on_board(
        self, mark: int, timeout: float, interest: Interest | None = None
    ) -> bool | None:
        """Wait for a notice after ``mark`` matching ``interest``: ``True`` if one came,
        ``False`` on timeout, ``None`` if the ledger could not be reached."""
        return self._watch_board(mark, timeout, interest)[0]

    def _watch_board(
        self,
        mark: int,
        timeout: float,
        interest: Interest | None = None,
        channels: frozenset[str] = ALL_CHANNELS,
    ) -> tuple[bool | None, int]:
        """:meth:`_wait_on_board`, with the position the board was checked through
        (:meth:`ChangeBoard.watch`); ``channels``: where the notices ``interest`` may match are
        sent."""
        try:
            return self._get_board().watch(mark, timeout, interest, channels)
        except (LedgerBusy, LedgerUnavailable):
            return None, mark

    def close(self) -> None:
        """Release the change-feed connection (the engine is the caller's)."""
        if self._board is not None:
            self._board.close()
            self._board = None

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
