"""The audit chain's hash of a record with a pre-serialised payload is the canonical one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from supervisor.canonical import canonical_json
from supervisor.ledger.audit import chain_hash, chain_hash_json

_payloads = st.dictionaries(
    st.text(max_size=6),
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text() | st.lists(st.text(max_size=4), max_size=3),
    max_size=5,
)  # fmt: skip


class _Label(str):
    """A str subclass: takes the generic path."""


@given(
    seq=st.integers(min_value=1, max_value=2**62),
    at=st.datetimes(timezones=st.just(UTC)),
    actor=st.text(),
    action=st.text(max_size=12),
    subject=st.text(max_size=40),
    payload=_payloads,
    prev_hash=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
)
def test_the_spliced_record_hashes_like_the_whole_canonical_record(
    seq: int, at: datetime, actor: str, action: str, subject: str, payload: dict[str, Any],
    prev_hash: str,
) -> None:  # fmt: skip
    fields: dict[str, Any] = dict(seq=seq, at=at, action=action, subject=subject,
                                  prev_hash=prev_hash)  # fmt: skip
    whole = chain_hash(**fields, actor=actor, payload=payload)
    spliced = chain_hash_json(**fields, actor=actor, payload_json=canonical_json(payload))
    generic = chain_hash_json(**fields, actor=_Label(actor), payload_json=canonical_json(payload))
    assert spliced == whole == generic


def test_quotes_controls_and_non_ascii_are_written_as_canonical_json() -> None:
    at = datetime(2026, 12, 5, 9, 30, tzinfo=UTC)
    fields: dict[str, Any] = dict(
        seq=7, at=at, actor='op "x"\\\n\x00é', action="approve", subject="p\u2028\ud7ff",
        prev_hash="0" * 64,
    )  # fmt: skip
    assert chain_hash_json(**fields, payload_json=canonical_json({"a": 1})) == chain_hash(
        **fields, payload={"a": 1}
    )
