"""Secrets are removed from text bound for traces."""

from __future__ import annotations

import pytest

from supervisor.redact import REDACTED, redact


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("key sk-proj-abcdefghijklmnop", "sk-proj-abcdefghijklmnop"),
        ("Authorization: Bearer eyJhbGciOi.abc", "eyJhbGciOi.abc"),
        ("password=hunter2!", "hunter2!"),
        ("api_key: 'xyz123456'", "xyz123456"),
        ("postgresql://app:s3cret@db:5432/x", "s3cret"),
        ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("gh token ghp_abcdefghijklmnopqrstuvwxyz", "ghp_abcdefghijklmnopqrstuvwxyz"),
    ],
)
def test_secret_shapes_are_redacted(text: str, secret: str) -> None:
    cleaned = redact(text, environ={})
    assert secret not in cleaned
    assert REDACTED in cleaned


def test_secret_environment_values_are_redacted() -> None:
    cleaned = redact(
        "crm said: bad credentials Zq9!long-value", environ={"CRM_TOKEN": "Zq9!long-value"}
    )
    assert "Zq9!long-value" not in cleaned


def test_ordinary_text_is_kept() -> None:
    text = "ValueError: sku A-100 not found in warehouse london"
    assert redact(text, environ={"HOME": "/root"}) == text
