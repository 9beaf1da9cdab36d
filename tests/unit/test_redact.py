"""Secrets are removed from text bound for traces."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote, quote_plus, urlencode

import pytest
from ada_url import URL, URLSearchParams

from supervisor.redact import MIN_SECRET_CHARS, REDACTED, KnownSecrets, redact, redact_data


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


# A quote of each kind, a space, a tilde, a backslash and non-ASCII: every encoding differs.
AWKWARD = "Zk'9\"wö rd~\\Q7x"
# Without a double quote, repr() of a text holding it picks double quotes and keeps ' as is.
NO_DOUBLE_QUOTE = "Zk'9wö rd~\\Q7x"


def _base64_inside(raw: bytes, shift: int) -> str:
    """``raw`` base64-encoded as part of a larger buffer, starting ``shift`` bytes in."""
    return base64.b64encode(b"ab"[:shift] + raw + b"yz").decode()


def _form_urlencoded(value: str) -> str:
    """``value`` as a browser writes it into a submitted form (x-www-form-urlencoded)."""
    params = URLSearchParams("")
    params.append("pw", value)
    return str(params)


def _encodings(value: str) -> dict[str, str]:
    raw = value.encode()
    return {
        "repr": repr(value),
        "repr-after-a-quote": repr("'" + value),
        "ascii": ascii(value),
        "repr-of-a-dict": repr({"password": value}),
        "json": json.dumps(value),
        "json-unicode": json.dumps(value, ensure_ascii=False),
        "quote-no-safe": quote(value, safe=""),
        "quote": quote(value),
        "quote_plus": quote_plus(value),
        "urlencode": urlencode({"pw": value}),
        "chromium-path-query-fragment": URL(f"http://h/{value}?q={value}#{value}").href,
        "chromium-form-submission": _form_urlencoded(value),
        "base64": base64.b64encode(raw).decode(),
        "base64-urlsafe": base64.urlsafe_b64encode(raw).decode(),
        "base64-shift-1": _base64_inside(raw, 1),
        "base64-shift-2": _base64_inside(raw, 2),
    }


@pytest.mark.parametrize("value", [AWKWARD, NO_DOUBLE_QUOTE], ids=["both-quotes", "one-quote"])
@pytest.mark.parametrize("encoding", sorted(_encodings(AWKWARD)))
def test_known_values_are_redacted_in_their_usual_encodings(value: str, encoding: str) -> None:
    before, after = "ValueError: login failed: ", " (retry later)"
    text = before + _encodings(value)[encoding] + after
    by_value = redact(text, environ={}, known=[value])
    for cleaned in (KnownSecrets([value]).redact_text(text), by_value):
        assert cleaned.startswith(before) and cleaned.endswith(after)
        kept = cleaned.removeprefix(before).removesuffix(after)
        assert REDACTED in kept
        assert "Zk" not in kept and "Q7x" not in kept, kept  # neither end of the value is left
        if encoding.startswith("base64"):
            head, _, tail = kept.partition(REDACTED)
            assert len(head) <= 3 and len(tail.rstrip("=")) <= 4, kept  # neighbouring bytes


def test_secret_environment_values_are_redacted_in_their_encodings_too() -> None:
    text = f"upstream said {json.dumps(AWKWARD)}"
    assert "Q7x" not in redact(text, environ={"CRM_PASSWORD": AWKWARD})


def test_encoded_forms_keep_other_text_and_ignore_short_values() -> None:
    from supervisor.redact import encoded_forms

    forms = encoded_forms(AWKWARD)
    assert AWKWARD in forms
    assert all(len(form) >= MIN_SECRET_CHARS for form in forms)
    short = "é'"  # below the minimum length: neither the value nor any form of it is replaced
    assert KnownSecrets([short]).redact_text("é' %C3%A9%27 \\xe9\\'") == "é' %C3%A9%27 \\xe9\\'"
    text = "ValueError: sku A-100 not found in warehouse london (retry 3/5)"
    assert KnownSecrets([AWKWARD, "plain-looking-value"]).redact_text(text) == text
    # A value that has no UTF-8 form (a lone surrogate) still gets its other forms.
    assert "\ud800abcd" in encoded_forms("\ud800abcd")


def test_known_values_are_replaced_in_keys_and_values_at_every_depth() -> None:
    known = KnownSecrets(["plain-looking-value"])
    data = {"k-plain-looking-value": [{"x": "a plain-looking-value b"}], "n": 1}
    assert known.redact_data(data) == {f"k-{REDACTED}": [{"x": f"a {REDACTED} b"}], "n": 1}
    patterned = {"sk-live1234567890abcdef": {"note": "Bearer abcdefgh"}}
    assert redact_data(patterned, environ={}) == {REDACTED: {"note": REDACTED}}
