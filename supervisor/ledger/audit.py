"""The audit hash chain.

Each record's ``hash`` is SHA-256 over the canonical JSON of
``{seq, at, actor, action, subject, payload, prev_hash}``, where ``at`` is the UTC ISO-8601
time with microseconds and ``prev_hash`` is the previous record's hash (64 zeros for seq 1).
Changing, removing or reordering any record breaks every hash after it; ``verify`` reports the
first seq where the recomputed chain disagrees with what is stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from json.encoder import encode_basestring
from typing import Any

from supervisor.canonical import canonical_hash, canonical_json, sha256_hex
from supervisor.ledger.models import AuditRecord, AuditReport

GENESIS_HASH = "0" * 64
_quoted = encode_basestring  # how canonical JSON writes a string (``ensure_ascii=False``)


def format_at(at: datetime) -> str:
    """The timestamp form that is hashed (UTC, microseconds, explicit offset)."""
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def chain_hash(
    *,
    seq: int,
    at: datetime,
    actor: str,
    action: str,
    subject: str,
    payload: dict[str, Any],
    prev_hash: str,
) -> str:
    """Compute one record's hash from its content and its predecessor's hash."""
    return canonical_hash(
        {
            "seq": seq,
            "at": format_at(at),
            "actor": actor,
            "action": action,
            "subject": subject,
            "payload": payload,
            "prev_hash": prev_hash,
        }
    )


def chain_hash_json(
    *,
    seq: int,
    at: datetime,
    actor: str,
    action: str,
    subject: str,
    payload_json: str,
    prev_hash: str,
) -> str:
    """:func:`chain_hash` for a payload already in canonical JSON (``canonical_json(payload)``).

    Splices ``payload_json`` into the canonical form of the record instead of serialising the
    payload a second time; the bytes hashed are identical to :func:`chain_hash`'s.
    """
    if (
        type(seq) is int
        and type(actor) is str
        and type(action) is str
        and type(subject) is str
        and type(prev_hash) is str
    ):  # the record written out by hand: keys in sorted order, strings as ``json`` quotes them
        return sha256_hex(
            f'{{"action":{_quoted(action)},"actor":{_quoted(actor)},"at":{_quoted(format_at(at))},'
            f'"payload":{payload_json},"prev_hash":{_quoted(prev_hash)},"seq":{seq},'
            f'"subject":{_quoted(subject)}}}'
        )
    head = canonical_json(
        {"action": action, "actor": actor, "at": format_at(at)}
    )  # keys sorted: action, actor, at < payload < prev_hash, seq, subject
    tail = canonical_json({"prev_hash": prev_hash, "seq": seq, "subject": subject})
    return sha256_hex(head[:-1] + ',"payload":' + payload_json + "," + tail[1:])


def chained_text(
    *, at: datetime, actor: str, action: str, subject: str, payload_json: str
) -> tuple[str, str]:
    """The text :func:`chain_hash_json` hashes, in two parts around what only the chain's tip
    decides: ``head + prev_hash + '","seq":' + str(seq) + tail`` is that text (the server
    chains a record this way under the lock; tests compare the two)."""
    return (
        f'{{"action":{_quoted(action)},"actor":{_quoted(actor)},"at":{_quoted(format_at(at))},'
        f'"payload":{payload_json},"prev_hash":"',
        f',"subject":{_quoted(subject)}}}',
    )


def verify_chain(records: Iterable[AuditRecord]) -> AuditReport:
    """Recompute the chain over ``records`` (ascending seq, starting at 1).

    Returns:
        ``ok=True`` with the count checked, or the first broken seq and why.
    """
    expected_prev = GENESIS_HASH
    expected_seq = 1
    checked = 0
    for record in records:
        if record.seq != expected_seq:
            return AuditReport(
                ok=False,
                checked=checked,
                first_broken_seq=expected_seq,
                reason=f"seq {expected_seq} is missing (next stored seq is {record.seq})",
            )
        if record.prev_hash != expected_prev:
            return AuditReport(
                ok=False,
                checked=checked,
                first_broken_seq=record.seq,
                reason="prev_hash does not match the previous record's hash",
            )
        recomputed = chain_hash(
            seq=record.seq,
            at=record.at,
            actor=record.actor,
            action=record.action,
            subject=record.subject,
            payload=record.payload,
            prev_hash=record.prev_hash,
        )
        if recomputed != record.hash:
            return AuditReport(
                ok=False,
                checked=checked,
                first_broken_seq=record.seq,
                reason="stored hash does not match the record's content",
            )
        expected_prev = record.hash
        expected_seq += 1
        checked += 1
    return AuditReport(ok=True, checked=checked)
