"""Secrets are removed from text bound for traces."""

from __future__ import annotations

import pytest

from supervisor.redact import REDACTED, KnownSecrets, redact


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


# The BIP-39 test vector for the entropy 7f7f...7f.
SEED_PHRASE = "legal winner thank year wave sausage worth useful legal winner thank yellow"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\n"
            "-----END RSA PRIVATE KEY-----\nafter",
            "MIIEowIBAAKCAQEA7bq",
        ),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA (cut)", "b3BlbnNzaC1rZXk"),
        ("sent X-Api-Key: 9f8e7d6c5b4a and more", "9f8e7d6c5b4a"),
        ("Cookie: session=a1b2c3d4; theme=dark\nnext line", "a1b2c3d4"),
        ("Authorization: Basic YWxpY2U6c2VjcmV0", "YWxpY2U6c2VjcmV0"),
        ("your PIN is 4821, keep it safe", "4821"),
        ("pin_code=90210", "90210"),
        ("OTP 738112 expires in 5 minutes", "738112"),
        ("verification code: 551234", "551234"),
        ("pay DE89 3704 0044 0532 0130 00 today", "3704 0044 0532"),
        ("iban GB82WEST12345698765432.", "GB82WEST12345698765432"),
        (f"wallet words: {SEED_PHRASE}", "wave sausage worth"),
        ("the password is plum-Orchard-42 for now", "plum-Orchard-42"),
        ("Passphrase was: 'correct horse'", "correct horse"),
        ("GET /v1/chat?api-key=Q9w8E7r6T5&x=1", "Q9w8E7r6T5"),
        ("blob?sig=Zx81kq2&sv=2024", "Zx81kq2"),
    ],
)
def test_more_secret_shapes_are_redacted(text: str, secret: str) -> None:
    cleaned = redact(text, environ={})
    assert secret not in cleaned
    assert REDACTED in cleaned


@pytest.mark.parametrize(
    "text",
    [
        "the quick brown fox jumps over the lazy dog while seven cats watch from the old fence",
        "order DE89370400440532013001 has a bad checksum",  # not a valid IBAN
        "the spinner 4821 turned; pinned at 12345",
        "line 1234, in main",
    ],
)
def test_lookalikes_are_kept(text: str) -> None:
    assert redact(text, environ={}) == text


def test_known_values_are_redacted_whatever_their_shape() -> None:
    secrets = KnownSecrets(["plain-looking-value", None, "", "abc"])
    assert secrets.values == ("plain-looking-value",)  # short and empty values are ignored
    data = {"detail": "failed with plain-looking-value!", "n": 3, "list": ["plain-looking-value"]}
    assert secrets.redact_data(data) == {
        "detail": f"failed with {REDACTED}!",
        "n": 3,
        "list": [REDACTED],
    }
    assert redact("x plain-looking-value y", environ={}, known=["plain-looking-value"]) == (
        f"x {REDACTED} y"
    )
