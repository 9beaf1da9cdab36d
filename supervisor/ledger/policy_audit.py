"""Replaying the ``policy_apply`` audit records against the ``policy_version`` rows.

A policy row is a cache of the audit record that applied it; any process that can write the
ledger can insert, rewrite or delete rows with SQL. :class:`PolicyReplay` collects the
``policy_apply`` records (subject ``policy``) while ``supervisor.ledger.verify`` reads the
chain, then names every row its record does not explain (version, document hash, document,
applied_by, applied_at, reason, audit_seq), every row without a record, every record without
its row, and records that do not follow each other (v1, v2, ... each naming the one before).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, NamedTuple

from supervisor.canonical import canonical_json, sha256_hex
from supervisor.errors import CanonicalJSONError
from supervisor.ledger.models import AuditRecord
from supervisor.ledger.policy import POLICY_APPLY, POLICY_SUBJECT


class PolicyRow(NamedTuple):
    """One ``policy_version`` row exactly as stored (the document as its stored text)."""

    version: int
    document_json: str
    document_hash: str
    applied_by: str
    applied_at: datetime
    reason: str | None
    audit_seq: int


class PolicyFinding(NamedTuple):
    """One thing about the policy rows that the ``policy_apply`` records do not explain."""

    version: int | None
    field: str
    chain: str | None
    row: str | None
    detail: str


def _document_digest(document: Any) -> str:
    """A short, comparable form of a document (its canonical JSON's SHA-256)."""
    try:
        return sha256_hex(canonical_json(document))[:12]
    except CanonicalJSONError:
        return "(not JSON data)"


def _row_document(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


class PolicyReplay:
    """Collects ``policy_apply`` records (ascending seq) and checks the policy rows."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []
        self.rows_checked = 0

    def add(self, record: AuditRecord) -> None:
        """Keep ``record`` if it applies a policy."""
        if record.subject == POLICY_SUBJECT and record.action == POLICY_APPLY:
            self.records.append(record)

    def findings(self, rows: Iterable[PolicyRow]) -> Iterator[PolicyFinding]:
        """Everything about ``rows`` (every policy row) the collected records do not explain."""
        by_version: dict[int, PolicyRow] = {}
        for stored in rows:
            self.rows_checked += 1
            by_version[stored.version] = stored
        previous: tuple[int, Any] | None = None
        for record in self.records:
            payload = record.payload
            version = payload.get("version")
            if not isinstance(version, int) or isinstance(version, bool):
                yield PolicyFinding(
                    None, "version", _text(version), None,
                    f"seq {record.seq}: a policy_apply record without a version number",
                )  # fmt: skip
                continue
            yield from _sequence_findings(record, version, previous)
            previous = (version, payload.get("document_hash"))
            row: PolicyRow | None = by_version.pop(version, None)
            if row is None:
                yield PolicyFinding(
                    version, "row", f"applied at seq {record.seq}", None,
                    "the audit chain applied this version but its policy row is gone",
                )  # fmt: skip
                continue
            yield from _row_findings(record, row)
        for row in by_version.values():
            yield PolicyFinding(
                row.version, "row", None, f"applied by {row.applied_by}",
                "a policy row that no policy_apply audit record applied",
            )  # fmt: skip


def _sequence_findings(
    record: AuditRecord, version: int, previous: tuple[int, Any] | None
) -> Iterator[PolicyFinding]:
    """A record must apply the next version and name the one it replaces."""
    expected = previous[0] + 1 if previous else 1
    payload = record.payload
    named = (payload.get("previous_version"), payload.get("previous_hash"))
    if version != expected or named != (previous or (None, None)):
        yield PolicyFinding(
            version, "version", f"v{expected}", f"v{version}",
            f"seq {record.seq}: applied out of order (after "
            f"{f'v{previous[0]}' if previous else 'no version'}, naming "
            f"{f'v{named[0]}' if named[0] is not None else 'none'} as the previous one)",
        )  # fmt: skip


def _row_findings(record: AuditRecord, row: PolicyRow) -> Iterator[PolicyFinding]:
    """The fields of ``row`` that the record that applied it does not explain."""
    payload = record.payload
    stored_document = _row_document(row.document_json)
    expected: list[tuple[str, str | None, str | None]] = [
        ("document_hash", _text(payload.get("document_hash")), row.document_hash),
        ("document", _document_digest(payload.get("document")),
         _document_digest(stored_document)),
        ("applied_by", _text(payload.get("applied_by")), row.applied_by),
        ("applied_at", record.at.isoformat(), row.applied_at.isoformat()),
        ("reason", _text(payload.get("reason")), row.reason),
        ("audit_seq", str(record.seq), str(row.audit_seq)),
    ]  # fmt: skip
    for field, chain_says, row_says in expected:
        if chain_says != row_says:
            yield PolicyFinding(
                row.version, field, chain_says, row_says,
                f"the policy row's {field} is not the audited one",
            )  # fmt: skip
    recomputed = sha256_hex(row.document_json.encode())
    if recomputed != row.document_hash:
        yield PolicyFinding(
            row.version, "document_hash", recomputed, row.document_hash,
            "the stored document does not hash to the row's document_hash",
        )  # fmt: skip
