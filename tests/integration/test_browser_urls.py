"""The gate reads navigation URLs as Chromium does, or refuses them: checked against Chromium.

Real headless Chromium (the worker's flags) parses every input with ``new URL(x)``; the gate's
verdict on the same input must either be a URL refusal or agree with Chromium on the origin
(scheme, host, port) and on whether that origin is allowed. Hypothesis builds the shapes where
URL parsers are known to part ways: backslashes and mixed slashes, tabs and newlines, leading
and trailing controls, userinfo with ``@`` and ``:``, percent-encoded, IDNA, full-width and
upper-case hosts, IPv4 in hex, octal and shorthand, IPv6, odd ports, missing slashes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.browser_run import chromium_or_skip
from support.chromium_urls import ChromiumReading, ChromiumURLs

from sandboxes.browser import BrowserPolicy, BrowserRule
from sandboxes.browser.targets import navigation_url
from sandboxes.browser.urls import DEFAULT_PORTS, read_url, with_placeholders

pytestmark = pytest.mark.slow

POLICY = BrowserPolicy(
    allowed_domains=("127.0.0.1:8000", "example.com"),
    rules=(BrowserRule(action="navigate", verdict="allow"),),
)
URL_REFUSALS = {"url_ambiguous", "url_credentials", "url_unparsable"}


def fullwidth(text: str) -> str:
    """``text`` in full-width forms (U+FF01..U+FF5E), which IDNA maps back to ASCII."""
    return "".join(chr(ord(char) + 0xFEE0) if "!" <= char <= "~" else char for char in text)


KNOWN_TRICKS = [
    "http://127.0.0.1:9000\\@127.0.0.1:8000/",
    "http://evil.com\\@example.com/",
    "http:\\\\evil.com\\@example.com",
    "http:/\\evil.com/",
    "http:evil.com/",
    "http:///evil.com/",
    "\x00 http://evil.com\\@example.com/",
    "http://evil.com\t\\@example.com/",
    "http://0x7f.1:8000/",
    "http://2130706433:8000/",
    "http://0177.0.0.1:8000/",
    "http://127.1:8000/",
    "http://ex%61mple.com/",
    f"http://{fullwidth('example')}.com/",
    "http://EXAMPLE.com/",
    "http://example。com/",
    "http://exa\u00admple.com/",
    "http://user:pass@example.com/",
    "http://example.com:80@evil.com/",
    "http://example.com%2F@evil.com/",
    "http://[::ffff:127.0.0.1]:8000/",
    "http://[::1]:8000/",
    "http://127.0.0.1:08000/",
    "http://127.0.0.1:8000./",
    "http://127.0.0.1.:8000/",
    "https://example.com:443/",
    "http://example.com./",
    "javascript:alert(1)",
    "about:blank",
    "http://127.0.0.1:8000/",
    "HTTP://EXAMPLE.COM/a\\b/../c",
]


@pytest.fixture(scope="module")
def chromium_urls() -> Iterator[ChromiumURLs]:
    with ChromiumURLs(chromium_or_skip()) as oracle:
        yield oracle


def _ipv4_forms(number: int) -> list[str]:
    parts = list(ipaddress.IPv4Address(number).packed)
    return [
        str(number),
        hex(number),
        oct(number).replace("0o", "0"),
        ".".join(str(p) for p in parts),
        ".".join(hex(p) for p in parts),
        ".".join(f"0{p:o}" for p in parts),
        f"{parts[0]}.{number & 0xFFFFFF}",
        f"{parts[0]}.{parts[1]}.{number & 0xFFFF}",
        ".".join(str(p) for p in parts) + ".",
        ".".join(f"{p:03d}" for p in parts),
    ]


def _ipv6_forms(number: int) -> list[str]:
    address = ipaddress.IPv6Address(number)
    return [f"[{address.compressed}]", f"[{address.exploded}]", f"[{address.exploded.upper()}]"]


def _percent_encode(text: str, picks: list[int]) -> str:
    chosen = {index % len(text) for index in picks} if text else set()
    return "".join(
        "".join(f"%{byte:02X}" for byte in char.encode()) if i in chosen else char
        for i, char in enumerate(text)
    )


NAMED_HOSTS = st.sampled_from(
    [
        "127.0.0.1",
        "example.com",
        "EXAMPLE.COM",
        "Example.Com",
        "evil.com",
        "localhost",
        "127.0.0.1.",
        "example.com.",
        "a.example.com",
        "example.com.evil.net",
        "xn--nxasmq6b.com",
        "exa_mple.com",
        "",
    ]
)
UNICODE_HOSTS = st.sampled_from(
    [
        f"{fullwidth('example')}.com",
        "exämple.com",
        "EXÄMPLE.com",
        "faß.de",
        "example。com",
        ".".join(fullwidth(part) for part in ("127", "0", "0", "1")),
        "127。0。0。1",
        "exa\u00admple.com",
        "exa\u200bmple.com",
        "пример.рф",
        "\u0130xample.com",
        "e\u0301xample.com",
        "ex%C3%A4mple.com",
    ]
)
HOSTS = st.one_of(
    *[NAMED_HOSTS] * 4,
    UNICODE_HOSTS,
    st.integers(0, 2**32 - 1).flatmap(lambda n: st.sampled_from(_ipv4_forms(n))),
    st.sampled_from([2130706433]).flatmap(lambda n: st.sampled_from(_ipv4_forms(n))),
    st.integers(0, 2**128 - 1).flatmap(lambda n: st.sampled_from(_ipv6_forms(n))),
    st.sampled_from(["[::1]", "[0::1]", "[::ffff:127.0.0.1]", "[::1", "::1", "[v1.x]", "[::]"]),
    st.builds(_percent_encode, NAMED_HOSTS, st.lists(st.integers(0, 30), max_size=3)),
    st.text(alphabet=[*"ab1.-_%:@[]\\/?#^| \t", "ä", "。", fullwidth("0")], max_size=12),
)
_JUNK = [" ", "\t", "\n", "\x00", "\x1f", "\r\n", "\x0c"]
URLS = st.builds(
    lambda *pieces: "".join(pieces),
    st.sampled_from([""] * 10 + _JUNK),
    st.sampled_from(["http"] * 4 + ["https"] * 3 + ["HTTP", "hTTpS", "ftp", "ws", "file", ""]),
    st.sampled_from(["://"] * 12 + [":", ":/", ":\\", ":\\\\", ":/\\", ":\\/", ":///", "://\t"]),
    st.one_of(
        *[st.just("")] * 4,
        st.sampled_from(["127.0.0.1:8000@", "example.com@", "example.com\\@", "@", ":@"]),
        st.text(alphabet="ab:@\\%/ 1", max_size=8).map(lambda text: text + "@"),
    ),
    HOSTS,
    st.one_of(
        *[st.just("")] * 2,
        st.sampled_from(
            [":", ":80", ":443", ":8000", ":08000", ":65536", ":-1", f":{fullwidth('8000')}"]
        ),
        st.integers(0, 70000).map(lambda port: f":{port}"),
    ),
    st.sampled_from(
        [
            "",
            "/",
            "/path",
            "\\path",
            "/a\\b",
            "?q=1",
            "#f",
            "/@evil.com",
            "\\@evil.com",
            "?@evil.com",
            "#@evil.com",
            "/..\\..",
            "/%2e%2e/",
            "/<secret>x</secret>",
        ]
    ),
    st.sampled_from([""] * 10 + _JUNK),
)


def _port(reading: ChromiumReading) -> int | None:
    if reading.port:
        return int(reading.port)
    return DEFAULT_PORTS.get(reading.scheme)


def _chromium_allows(reading: ChromiumReading) -> bool:
    """The allowlist, applied to Chromium's own reading: 127.0.0.1:8000 and example.com."""
    if reading.href == "about:blank":
        return True
    if reading.scheme not in DEFAULT_PORTS:
        return False
    port = _port(reading)
    return (reading.host == "127.0.0.1" and port == 8000) or reading.host == "example.com"


def check_agreement(oracle: ChromiumURLs, inputs: list[str]) -> list[str]:
    """Assert the gate refuses each input or agrees with Chromium; return the accepted ones."""
    accepted: list[str] = []
    decisions = [POLICY.decide("navigate", page_url="about:blank", target_url=x) for x in inputs]
    loads = [
        with_placeholders(read_url(x).href) if d.code not in URL_REFUSALS else x
        for x, d in zip(inputs, decisions, strict=True)
    ]
    readings = oracle.parse([*inputs, *loads])
    raw_readings, load_readings = readings[: len(inputs)], readings[len(inputs) :]
    for text, decision, raw, loaded in zip(
        inputs, decisions, raw_readings, load_readings, strict=True
    ):
        if decision.code in URL_REFUSALS:
            continue
        gate = read_url(text)
        accepted.append(text)
        if not gate.is_web:  # never loaded, whatever Chromium makes of it (about:blank aside)
            assert decision.verdict == "deny" or gate.href == "about:blank", (text, decision)
            assert raw is None or raw.scheme == gate.scheme, text
            continue
        assert raw is not None, f"the gate read {text!r} as {gate.origin}, Chromium as no URL"
        assert loaded is not None, f"Chromium cannot parse what the worker loads for {text!r}"
        for chromium in (raw, loaded):
            assert (chromium.scheme, chromium.host, _port(chromium)) == (
                gate.scheme,
                gate.host,
                gate.port,
            ), text
            assert not chromium.has_credentials, text
        expected = "allow" if _chromium_allows(raw) else "deny"
        assert decision.verdict == expected, (text, decision)
    return accepted


def test_the_gate_and_chromium_agree_on_known_tricks_or_the_gate_refuses(
    chromium_urls: ChromiumURLs,
) -> None:
    accepted = check_agreement(chromium_urls, KNOWN_TRICKS)
    assert {
        "http://127.0.0.1:8000/",
        "http://EXAMPLE.com/",
        "https://example.com:443/",
        "HTTP://EXAMPLE.COM/a\\b/../c",
        "about:blank",
    } <= set(accepted)
    assert "http://127.0.0.1:9000\\@127.0.0.1:8000/" not in accepted
    assert "http://evil.com\\@example.com/" not in accepted


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(inputs=st.lists(URLS, min_size=1, max_size=25))
@example(inputs=KNOWN_TRICKS)
def test_for_generated_urls_the_gate_agrees_with_chromium_or_refuses(
    chromium_urls: ChromiumURLs, inputs: list[str]
) -> None:
    check_agreement(chromium_urls, inputs)


def test_search_targets_are_read_like_any_other_url(chromium_urls: ChromiumURLs) -> None:
    url = navigation_url("search", {"query": "a\\b @evil.com", "engine": "duckduckgo"})
    assert url is not None
    (reading,) = chromium_urls.parse([url])
    assert reading is not None and reading.host == "duckduckgo.com"
    assert read_url(url).origin == "https://duckduckgo.com:443"
