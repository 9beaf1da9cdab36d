"""Identifier extraction for offloaded-result pointers: deterministic, bounded, documented."""

from __future__ import annotations

import json
from typing import Any

import pytest

from supervisor.runtime.identifiers import (
    extract_from_value,
    extract_identifiers,
    is_identifier_key,
    normalise_key,
    scan_text,
)


def _extract(value: Any, limit: int = 50) -> list[str]:
    return extract_identifiers(json.dumps(value), limit=limit)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("id", True),
        ("ID", True),
        ("order_id", True),
        ("orderId", True),
        ("Order-Id", True),
        ("uuid", True),
        ("key", True),
        ("api_key", True),
        ("objectKey", True),
        ("sku", True),
        ("url", True),
        ("href", True),
        ("email", True),
        ("identity", False),
        ("idea", False),
        ("keys", False),
        ("name", False),
        ("monkey", False),
        ("paid", False),
    ],
)
def test_identifier_keys(key: str, expected: bool) -> None:
    assert is_identifier_key(key) is expected


def test_normalise_key_is_snake_case() -> None:
    assert normalise_key("customerEmailURL") == "customer_email_url"
    assert normalise_key(" Order Key ") == "order_key"


def test_values_of_identifier_keys_in_document_order() -> None:
    value = {
        "id": 7,
        "name": "Widget",
        "sku": "W-100",
        "owner": {"user_id": "u-1", "userKey": "k-9"},
        "links": [{"href": "/items/7"}, {"url": "https://example.com/items/7"}],
        "email": "sales@example.com",
    }
    assert _extract(value) == [
        "7",
        "W-100",
        "u-1",
        "k-9",
        "/items/7",
        "https://example.com/items/7",
        "sales@example.com",
    ]


def test_booleans_floats_nulls_and_containers_under_identifier_keys_are_not_identifiers() -> None:
    value = {"id": True, "order_id": 1.5, "key": None, "sku": ["a"], "user_id": {"x": 1}}
    assert _extract(value) == []


def test_patterns_found_inside_free_text() -> None:
    text = (
        "See https://example.com/docs?q=1&r=2, mail ops@example.org or "
        "open 123e4567-e89b-12d3-a456-426614174000."
    )
    assert _extract({"message": text}) == [
        "https://example.com/docs?q=1&r=2",
        "ops@example.org",
        "123e4567-e89b-12d3-a456-426614174000",
    ]


def test_url_trailing_punctuation_is_dropped_and_bare_scheme_ignored() -> None:
    assert list(scan_text("(https://a.example/x). and http:// alone")) == ["https://a.example/x"]


def test_object_keys_are_scanned_for_patterns() -> None:
    value = {"by_uuid": {"123e4567-e89b-12d3-a456-426614174000": {"total": 1}}}
    assert _extract(value) == ["123e4567-e89b-12d3-a456-426614174000"]


def test_duplicates_are_dropped_first_seen_order_kept() -> None:
    value = [{"id": "a"}, {"id": "b"}, {"id": "a"}, {"note": "mail b@example.com"}, {"id": "b"}]
    assert _extract(value) == ["a", "b", "b@example.com"]


def test_limit_bounds_the_list() -> None:
    value = [{"id": f"item-{index}"} for index in range(1000)]
    assert _extract(value, limit=5) == [f"item-{index}" for index in range(5)]
    assert _extract(value, limit=0) == []


def test_too_long_candidates_are_skipped_not_truncated() -> None:
    long_url = "https://example.com/" + "x" * 300
    value = {"url": long_url, "id": "short"}
    assert extract_identifiers(json.dumps(value), limit=10, max_chars=200) == ["short"]


def test_whitespace_is_stripped_and_empty_values_skipped() -> None:
    assert _extract({"id": "  abc  ", "key": "   ", "sku": ""}) == ["abc"]


def test_text_that_is_not_json_is_scanned_as_text() -> None:
    text = 'not json {"id": "hidden"} but https://example.net/a and x@example.io'
    assert extract_identifiers(text, limit=10) == ["https://example.net/a", "x@example.io"]


def test_deeply_nested_json_does_not_overflow() -> None:
    depth = 50_000
    text = "[" * depth + '{"id": "deep"}' + "]" * depth
    # The JSON parser's own recursion limit makes this plain text; the walk itself is iterative.
    assert extract_identifiers(text, limit=5) == []
    nested: Any = {"id": "deep"}
    for _ in range(depth):
        nested = [nested]
    assert extract_from_value(nested, limit=5) == ["deep"]


def test_extraction_is_deterministic() -> None:
    value = {"rows": [{"id": index, "url": f"https://e.com/{index % 7}"} for index in range(200)]}
    text = json.dumps(value)
    first = extract_identifiers(text, limit=20)
    assert first == extract_identifiers(text, limit=20)
    assert first[:3] == ["0", "https://e.com/0", "1"]
