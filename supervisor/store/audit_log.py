"""The audit log's statements on one ledger transaction. :class:`AuditLog` is the base of
:class:`supervisor.store.repository.LedgerTx`.

Appending chains each record to the one before it (:mod:`supervisor.ledger.audit`). Writers are
serialised by the chain lock (``BEGIN IMMEDIATE`` on SQLite, ``pg_advisory_xact_lock`` on
PostgreSQL), so the tip is read once per transaction and then followed locally; a PostgreSQL
write that takes the lock late has the server chain its record under the lock instead
(:data:`_INSERT_AUDIT_CHAINED`). On PostgreSQL each record's INSERT also queues its ``NOTIFY``
in the same statement, so listeners wake exactly when the change is committed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlmodel import SQLModel

from supervisor.canonical import canonical_json
from supervisor.ledger.audit import GENESIS_HASH, chain_hash_json, chained_text
from supervisor.ledger.models import AuditRecord
from supervisor.store.convert import audit_from_row, audit_to_values
from supervisor.store.notify import notice_channel, notice_payload
from supervisor.store.tables import AuditRow
from supervisor.store.transaction import TransactionBase

__all__ = ["SELECT_SUBJECT_AUDIT", "AuditEntry", "AuditLog"]

_AUDIT = SQLModel.metadata.tables[AuditRow.__tablename__]
_AUDIT_MAX = sa.select(sa.func.max(_AUDIT.c.seq))
_AUDIT_TIP = sa.select(_AUDIT.c.seq, _AUDIT.c.hash).order_by(_AUDIT.c.seq.desc()).limit(1)
# One subject's audit records, oldest first: an index range scan of ix_audit_subject.
SELECT_SUBJECT_AUDIT = (
    sa.select(_AUDIT).where(_AUDIT.c.subject == sa.bindparam("w_subject")).order_by(_AUDIT.c.seq)
)
_INSERT_AUDIT = sa.insert(_AUDIT)
_SELECT_AUDIT_AFTER = (
    sa.select(_AUDIT)
    .where(_AUDIT.c.seq > sa.bindparam("w_seq"))
    .order_by(_AUDIT.c.seq)
    .limit(sa.bindparam("w_limit"))
)
# PostgreSQL: a batch of audit records from one JSON array (one parameter: psycopg would
# quote text arrays element by element in Python), and one NOTIFY per record in seq order, each
# on its action's channel, in one statement (a data-modifying CTE runs to completion
# unreferenced).
_INSERT_AUDITS_NOTIFY = sa.text(
    "WITH appended AS (INSERT INTO audit"
    " (seq, at, actor, action, subject, payload_json, prev_hash, hash)"
    " SELECT seq, at, actor, action, subject, payload_json, prev_hash, hash"
    " FROM json_to_recordset(CAST(:rows AS json)) AS r(seq bigint, at timestamptz,"
    " actor text, action text, subject text, payload_json text, prev_hash text, hash text))"
    " SELECT pg_notify(p.notice->>0, p.notice->>1)"
    " FROM json_array_elements(CAST(:notices AS json)) WITH ORDINALITY AS p(notice, n)"
    " ORDER BY p.n"
)
# PostgreSQL: the audit INSERT and its NOTIFY in one statement (a data-modifying CTE).
_INSERT_AUDIT_NOTIFY = sa.select(
    sa.func.pg_notify(sa.bindparam("n_channel"), sa.bindparam("n_payload"))
).select_from(
    sa.insert(_AUDIT)
    .values({column.name: sa.bindparam(column.name) for column in _AUDIT.c})
    .returning(_AUDIT.c.seq)
    .cte("appended")
)
# PostgreSQL, a write that takes the chain lock late: the audit record chained on the server,
# under the lock, after the tip as it is then. The client sends the record's canonical text in
# two parts around the predecessor's hash and the seq (see chain_hash_json); the server hashes
# head || prev_hash || '","seq":' || seq || tail, the bytes chain_hash_json hashes. The NOTIFY
# names the record as notice_payload does.
_LONGEST_SEQ = 2**63 - 1  # a bigint seq as long as any can be
_INSERT_AUDIT_CHAINED = sa.text(
    "WITH tip AS (SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1),"
    " prev AS (SELECT coalesce((SELECT seq FROM tip), 0) AS seq,"
    " coalesce((SELECT hash FROM tip), :genesis) AS hash),"
    " appended AS (INSERT INTO audit"
    " (seq, at, actor, action, subject, payload_json, prev_hash, hash)"
    " SELECT prev.seq + 1, :at, :actor, :action, :subject, :payload_json, prev.hash,"
    ' encode(sha256(:head || convert_to(prev.hash || \'","seq":\' || (prev.seq + 1)::text,'
    " 'UTF8') || :tail), 'hex') FROM prev RETURNING seq)"
    " SELECT pg_notify(:channel, '[' || appended.seq::text || :notice_tail) FROM appended"
).bindparams(
    sa.bindparam("at", type_=_AUDIT.c.at.type),
    sa.bindparam("head", type_=sa.LargeBinary()),
    sa.bindparam("tail", type_=sa.LargeBinary()),
)
# Audit records after a seq, up to a tip, optionally only some actions and subjects.
_FILTER_SUBJECTS_MAX = 500


def _matching_to_tip(actions: bool, subjects: bool) -> Any:
    """PostgreSQL: the audit tip and the records after ``w_after`` up to it whose action is in
    ``w_actions`` and subject in ``w_subjects`` (each filter only if asked), at most
    ``w_limit``, in one statement: one row per record, each carrying the tip, or one row with
    the tip alone. The filters are arrays (``= ANY``), so one prepared statement serves any
    number of actions and subjects.

    One statement reads one snapshot, in which every record up to the tip is visible (records
    are appended in seq order under the chain lock and committed before it is released)."""
    tip = sa.select(sa.func.max(_AUDIT.c.seq).label("tip")).subquery("t")
    where = [_AUDIT.c.seq > sa.bindparam("w_after"), _AUDIT.c.seq <= tip.c.tip]
    if actions:
        where.append(_AUDIT.c.action == sa.any_(sa.bindparam("w_actions", type_=_TEXTS)))
    if subjects:
        where.append(_AUDIT.c.subject == sa.any_(sa.bindparam("w_subjects", type_=_TEXTS)))
    matching = (
        sa.select(_AUDIT)
        .where(*where)
        .order_by(_AUDIT.c.seq)
        .limit(sa.bindparam("w_limit"))
        .lateral("a")
    )
    return sa.select(tip.c.tip, *matching.c).select_from(tip.outerjoin(matching, sa.true()))


_TEXTS = sa.ARRAY(sa.String)
_MATCHING_TO_TIP = {
    (actions, subjects): _matching_to_tip(actions, subjects)
    for actions in (False, True)
    for subjects in (False, True)
}


class AuditEntry(NamedTuple):
    """What one audit record says; :meth:`AuditLog.append_audits` chains it."""

    at: datetime
    actor: str
    action: str
    subject: str
    payload: dict[str, Any]


class AuditLog(TransactionBase):
    """A transaction's audit log: appending chained records and reading them back."""

    def append_audit(
        self, *, at: datetime, actor: str, action: str, subject: str, payload: dict[str, Any]
    ) -> AuditRecord | None:
        """Append one chained audit record (callers hold the write lock, or take it late:
        then the server chains the record under the lock, and ``None`` is returned).

        The chain tip is read once per transaction (one indexed query on the primary key) and
        then followed locally: writers are serialised, so nobody else can append meanwhile.
        """
        self._trail = None
        if self.late:
            self._append_chained_on_server(AuditEntry(at, actor, action, subject, payload))
            return None
        record, values = self._chained(
            AuditEntry(at, actor, action, subject, payload), self._head()
        )
        if self.dialect == "postgresql":
            values["n_channel"] = notice_channel(action)
            values["n_payload"] = notice_payload(record.seq, action, subject)
            self._hot(_INSERT_AUDIT_NOTIFY, values, send=True)
        else:
            self._hot(_INSERT_AUDIT, values, insert=True, send=True)
        self._tip = (record.seq, record.hash)  # moved only once the record is in
        self.last_audit_seq = record.seq
        return record

    def _append_chained_on_server(self, entry: AuditEntry) -> None:
        """PostgreSQL, a late-locking write: the record is chained by the server under the
        lock (:data:`_INSERT_AUDIT_CHAINED`); its seq and hash are not read back."""
        at, actor, action, subject, payload = entry
        payload_json = canonical_json(payload)
        head, tail = chained_text(
            at=at, actor=actor, action=action, subject=subject, payload_json=payload_json
        )
        notice = notice_payload(_LONGEST_SEQ, action, subject)
        params = {
            "genesis": GENESIS_HASH, "at": at, "actor": actor, "action": action,
            "subject": subject, "payload_json": payload_json, "head": head.encode(),
            "tail": tail.encode(), "channel": notice_channel(action),
            # notice_payload's form for any seq: "[seq," + the rest, or "[seq]" if too long
            "notice_tail": notice.removeprefix(f"[{_LONGEST_SEQ}") if "," in notice else "]",
        }  # fmt: skip
        self._hot(_INSERT_AUDIT_CHAINED, params, send=True)
        self._tip = None  # the server chained it: read the tip again if a record follows here

    def append_audits(self, entries: Sequence[AuditEntry]) -> list[AuditRecord]:
        """Append chained audit records in order with one INSERT (and, on PostgreSQL, one
        statement for their notices), for a write that records many changes at once: a sweep
        holds the chain lock for three statements instead of two per record."""
        if not entries:
            return []
        self._trail = None
        records: list[AuditRecord] = []
        rows: list[dict[str, Any]] = []
        tip = self._head()
        for entry in entries:
            record, values = self._chained(entry, tip)
            tip = (record.seq, record.hash)
            records.append(record)
            rows.append(values)
        if self.dialect == "postgresql":
            for row in rows:
                row["at"] = row["at"].astimezone(UTC).isoformat()
            notices = [
                (notice_channel(r.action), notice_payload(r.seq, r.action, r.subject))
                for r in records
            ]
            batch = {"rows": json.dumps(rows), "notices": json.dumps(notices)}
            self._execute(_INSERT_AUDITS_NOTIFY, batch)
        else:
            self._execute(_INSERT_AUDIT, rows)
        self._tip = tip
        self.last_audit_seq = records[-1].seq
        return records

    def _head(self) -> tuple[int, str]:
        """The chain's tip (seq, hash): read once per transaction, then followed locally."""
        if self._tip is None:
            self._tip = self.audit_head()
        return self._tip

    @staticmethod
    def _chained(entry: AuditEntry, tip: tuple[int, str]) -> tuple[AuditRecord, dict[str, Any]]:
        """The record that follows ``tip`` for ``entry``, and its column values."""
        seq, prev_hash = tip[0] + 1, tip[1]
        at, actor, action, subject, payload = entry
        payload_json = canonical_json(payload)
        record_hash = chain_hash_json(
            seq=seq, at=at, actor=actor, action=action, subject=subject,
            payload_json=payload_json, prev_hash=prev_hash,
        )  # fmt: skip
        record = AuditRecord(
            seq=seq, at=at, actor=actor, action=action, subject=subject,
            payload=payload, prev_hash=prev_hash, hash=record_hash,
        )  # fmt: skip
        return record, audit_to_values(record, payload_json)

    def audit_after(self, seq: int, limit: int = 500) -> list[AuditRecord]:
        """Audit records with seq greater than ``seq``, ascending."""
        rows = self._hot(_SELECT_AUDIT_AFTER, {"w_seq": seq, "w_limit": limit}).all()
        return [audit_from_row(row) for row in rows]

    def audit_matching(
        self,
        after: int,
        through: int,
        limit: int,
        *,
        actions: Sequence[str] | None = None,
        subjects: Sequence[str] | None = None,
    ) -> tuple[list[AuditRecord], int]:
        """Audit records with ``after < seq <= through``, ascending, whose action is in
        ``actions`` and subject in ``subjects`` (either ``None``: any), at most ``limit`` read.
        More than a few hundred subjects are filtered here rather than sent to the server.

        Returns:
            The matching records and the seq read through (``through`` unless ``limit``
            rows were read): the follower's next cursor.
        """
        query = sa.select(_AUDIT).where(_AUDIT.c.seq > after, _AUDIT.c.seq <= through)
        if actions is not None:
            query = query.where(_AUDIT.c.action.in_(list(actions)))
        wanted = None
        if subjects is not None and len(subjects) > _FILTER_SUBJECTS_MAX:
            wanted = set(subjects)
        elif subjects is not None:
            query = query.where(_AUDIT.c.subject.in_(list(subjects)))
        rows = self._execute(query.order_by(_AUDIT.c.seq).limit(limit)).all()
        records = [audit_from_row(row) for row in rows]
        if wanted is not None:
            records = [record for record in records if record.subject in wanted]
        return records, int(rows[-1].seq) if len(rows) >= limit else through

    def audit_matching_to_tip(
        self,
        after: int,
        limit: int,
        *,
        actions: Sequence[str] | None = None,
        subjects: Sequence[str] | None = None,
    ) -> tuple[list[AuditRecord], int, int]:
        """The audit tip, and :meth:`audit_matching` after ``after`` up to it.

        On PostgreSQL one statement (one round trip, one snapshot); elsewhere the tip is read
        first, then the records up to it (audit records become visible in seq order, so none
        at or below the tip is missed).

        Returns:
            The matching records, the seq read through (``after`` when the tip is not past
            it) and the tip.
        """
        if self.dialect != "postgresql":
            tip = self.audit_tip()
            if tip <= after:
                return [], after, tip
            records, through = self.audit_matching(
                after, tip, limit, actions=actions, subjects=subjects
            )
            return records, through, tip
        params: dict[str, Any] = {"w_after": after, "w_limit": limit}
        if actions is not None:
            params["w_actions"] = list(actions)
        wanted = None
        if subjects is not None and len(subjects) > _FILTER_SUBJECTS_MAX:
            wanted = frozenset(subjects)
        elif subjects is not None:
            params["w_subjects"] = list(subjects)
        statement = _MATCHING_TO_TIP[(actions is not None, "w_subjects" in params)]
        rows = self._hot(statement, params).all()
        tip = int(rows[0].tip or 0)
        if tip <= after:
            return [], after, tip
        records = [audit_from_row(row) for row in rows if row.seq is not None]
        through = records[-1].seq if len(records) >= limit else tip
        if wanted is not None:
            records = [record for record in records if record.subject in wanted]
        return records, through, tip

    def audit_of(self, subject: str) -> list[AuditRecord]:
        """Every audit record about ``subject`` (a proposal id), ascending seq.

        On the claim's hot path: the columns come typed from the table (``at`` tz-aware), so
        the records are built without re-validation.
        """
        if self._trail is not None and self._trail[0] == subject:
            return list(self._trail[1])
        rows = self._hot(SELECT_SUBJECT_AUDIT, {"w_subject": subject}).all()
        return [audit_from_row(row) for row in rows]

    def audit_head(self) -> tuple[int, str]:
        """The newest audit record's seq and hash; ``(0, GENESIS_HASH)`` for an empty log."""
        row = self._hot(_AUDIT_TIP).first()
        return (int(row.seq), str(row.hash)) if row else (0, GENESIS_HASH)

    def audit_tip(self) -> int:
        """The highest audit seq (0 for an empty log)."""
        value = self._execute(_AUDIT_MAX).scalar()
        return int(value or 0)
