"""Browser policy and target resolution without a browser: domains, URL readings, verdicts,
masking, imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sandboxes.browser.policy import BrowserPolicy, BrowserRule, DomainPattern, url_origin
from sandboxes.browser.targets import (
    ResolvedAction,
    is_password_field,
    mask_text,
    navigation_url,
)
from sandboxes.browser.urls import NavigationURLRefused, read_url, with_placeholders


@pytest.mark.parametrize(
    ("pattern", "url", "expected"),
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000/form", True),
        ("127.0.0.1:8000", "http://127.0.0.1:8001/", False),
        ("127.0.0.1:8000", "http://localhost:8000/", False),
        ("127.0.0.1", "http://127.0.0.1:9999/", True),
        ("example.com", "https://EXAMPLE.com/a", True),
        ("example.com", "https://example.com.evil.net/", False),
        ("example.com", "https://www.example.com/", False),
        ("*.example.com", "https://a.b.example.com/", True),
        ("*.example.com", "https://example.com/", True),
        ("*.example.com", "https://badexample.com/", False),
        ("https://example.com", "http://example.com/", False),
        ("https://example.com:8443", "https://example.com:8443/x", True),
        ("example.com", "file:///etc/passwd", False),
        ("example.com", "javascript:alert(1)", False),
        ("example.com", "data:text/html,hi", False),
    ],
)
def test_domain_patterns_match_host_port_and_scheme_exactly(
    pattern: str, url: str, expected: bool
) -> None:
    assert DomainPattern.parse(pattern).matches(url) is expected


@pytest.mark.parametrize("bad", ["", "http://", "example.com/path", "example.com:notaport"])
def test_a_malformed_domain_pattern_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        DomainPattern.parse(bad)


def test_navigation_outside_the_allowed_domains_is_denied_even_when_a_rule_allows_it() -> None:
    policy = BrowserPolicy(
        allowed_domains=("127.0.0.1:8000",), rules=(BrowserRule(action="*", verdict="allow"),)
    )
    decision = policy.decide(
        "navigate", page_url="http://127.0.0.1:8000/", target_url="http://127.0.0.1:8001/"
    )
    assert decision.verdict == "deny"
    allowed = policy.decide("navigate", page_url="about:blank", target_url="http://127.0.0.1:8000/")
    assert allowed.verdict == "allow"


def test_default_verdicts_ask_for_mutations_allow_reads_and_deny_scripts() -> None:
    policy = BrowserPolicy(allowed_domains=("127.0.0.1:8000",))
    page = "http://127.0.0.1:8000/"
    assert policy.decide("click", page_url=page, target_url=None).verdict == "ask"
    assert policy.decide("input", page_url=page, target_url=None).verdict == "ask"
    assert policy.decide("navigate", page_url=page, target_url=page).verdict == "ask"
    assert policy.decide("scroll", page_url=page, target_url=None).verdict == "allow"
    assert policy.decide("extract", page_url=page, target_url=None).verdict == "allow"
    assert policy.decide("evaluate", page_url=page, target_url=None).verdict == "deny"
    assert policy.decide("upload_file", page_url=page, target_url=None).verdict == "deny"
    strict = policy.model_copy(update={"allow_read_only": False})
    assert strict.decide("scroll", page_url=page, target_url=None).verdict == "ask"


def test_rules_apply_per_action_and_domain_in_order() -> None:
    policy = BrowserPolicy(
        allowed_domains=("127.0.0.1", "example.com"),
        rules=(
            BrowserRule(action="click", domain="127.0.0.1:8000", verdict="allow"),
            BrowserRule(action="click", verdict="deny"),
        ),
    )
    assert policy.decide("click", page_url="http://127.0.0.1:8000/", target_url=None).verdict == (
        "allow"
    )
    assert policy.decide("click", page_url="http://127.0.0.1:9000/", target_url=None).verdict == (
        "deny"
    )
    assert policy.decide("input", page_url="https://example.com/", target_url=None).verdict == (
        "ask"
    )


def test_actions_on_a_page_outside_the_allowed_domains_are_denied() -> None:
    policy = BrowserPolicy(allowed_domains=("127.0.0.1:8000",))
    decision = policy.decide("click", page_url="http://127.0.0.1:9000/", target_url=None)
    assert decision.verdict == "deny"
    blank = policy.decide("scroll", page_url="about:blank", target_url=None)
    assert blank.verdict == "allow"


def test_browser_use_gets_host_patterns_and_no_allowed_domain_means_nowhere() -> None:
    policy = BrowserPolicy(allowed_domains=("127.0.0.1:8000", "https://example.com"))
    hosts = policy.browser_use_domains()
    assert {"127.0.0.1", "example.com"} <= set(hosts)
    assert all(h.startswith("chrome://") for h in BrowserPolicy().browser_use_domains())
    assert not BrowserPolicy().url_allowed("http://127.0.0.1:8000/")


def test_search_resolves_to_the_engine_url_which_the_policy_then_judges() -> None:
    url = navigation_url("search", {"query": "a b", "engine": "duckduckgo"})
    assert url == "https://duckduckgo.com/?q=a+b"
    assert url_origin(url) == "https://duckduckgo.com:443"
    policy = BrowserPolicy(allowed_domains=("127.0.0.1",))
    assert policy.decide("search", page_url="about:blank", target_url=url).verdict == "deny"


def test_password_text_is_masked_but_still_bound_to_the_exact_value() -> None:
    element = {"attributes": {"type": "password", "name": "pw"}}
    assert is_password_field(element)
    assert not is_password_field({"attributes": {"type": "text"}})
    key = b"k" * 32
    masked = mask_text("hunter2", key)
    assert "hunter2" not in str(masked)
    assert masked == mask_text("hunter2", key)
    assert masked != mask_text("hunter3", key)
    assert masked != mask_text("hunter2", b"j" * 32)


def test_importing_the_browser_package_does_not_import_browser_use() -> None:
    code = (
        "import sys, sandboxes, supervisor\n"
        "from sandboxes.browser import BrowserTask, BrowserPolicy\n"
        "import sandboxes.browser.worker\n"
        "assert 'browser_use' not in sys.modules, 'browser_use imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


ALLOW_NAVIGATION = BrowserPolicy(
    allowed_domains=("127.0.0.1:8000",), rules=(BrowserRule(action="navigate", verdict="allow"),)
)


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://127.0.0.1:9000\\@127.0.0.1:8000/", "url_ambiguous"),
        ("http://127.0.0.1:9000\\\\@127.0.0.1:8000/", "url_ambiguous"),
        ("\thttp://127.0.0.1:8000/", "url_ambiguous"),
        ("http://127.0.0.1:8000/ ", "url_ambiguous"),
        ("http://127.0.0.1:80\n00/", "url_ambiguous"),
        ("\x00http://127.0.0.1:8000/", "url_ambiguous"),
        ("http:127.0.0.1:8000/", "url_ambiguous"),
        ("http:\\\\127.0.0.1:8000\\", "url_ambiguous"),
        ("http:/127.0.0.1:8000/", "url_ambiguous"),
        ("http://0x7f.1:8000/", "url_ambiguous"),
        ("http://2130706433:8000/", "url_ambiguous"),
        ("http://127.0.0.%31:8000/", "url_ambiguous"),
        ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11:8000/", "url_ambiguous"),  # full-width
        ("http://127.0.0.1:9000@127.0.0.1:8000/", "url_credentials"),
        ("http://user:pw@127.0.0.1:8000/", "url_credentials"),
        ("127.0.0.1:8000", "url_unparsable"),
        ("http://127.0.0.1:80000/", "url_unparsable"),
    ],
)
def test_a_url_that_reads_two_ways_is_refused_even_when_navigation_is_allowed(
    url: str, code: str
) -> None:
    decision = ALLOW_NAVIGATION.decide("navigate", page_url="about:blank", target_url=url)
    assert (decision.verdict, decision.code) == ("deny", code)
    assert not ALLOW_NAVIGATION.url_allowed(url)
    with pytest.raises(NavigationURLRefused) as refused:
        read_url(url)
    assert refused.value.code == code


@pytest.mark.parametrize(
    ("url", "href"),
    [
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/"),
        ("HTTP://127.0.0.1:8000/a\\b/../c", "http://127.0.0.1:8000/a/c"),
        ("http://127.0.0.1:8000/?q=a b", "http://127.0.0.1:8000/?q=a%20b"),
    ],
)
def test_the_gate_decides_on_and_runs_the_serialised_whatwg_url(url: str, href: str) -> None:
    decision = ALLOW_NAVIGATION.decide("navigate", page_url="about:blank", target_url=url)
    assert decision.verdict == "allow"
    read = read_url(url)
    assert (read.href, read.origin) == (href, "http://127.0.0.1:8000")
    action = ResolvedAction(
        action_name="navigate",
        tool_name="browser.navigate",
        schema_hash="h",
        arguments={"url": url, "target_url": read.href, "target_origin": read.origin},
        execution_target={},
        page_url="about:blank",
        target_url=read.href,
    )
    assert action.run_params({"url": url, "new_tab": False}) == {"url": href, "new_tab": False}
    assert action.run_params({"index": 3}) == {"index": 3}


def test_secret_placeholders_survive_serialisation_and_cannot_move_the_origin() -> None:
    read = read_url("http://127.0.0.1:8000/login?token=<secret>tok</secret>")
    assert "%3Csecret%3E" in read.href
    restored = with_placeholders(read.href)
    assert restored == "http://127.0.0.1:8000/login?token=<secret>tok</secret>"
    substituted = restored.replace("<secret>tok</secret>", "x\\@evil.com/")
    assert url_origin(substituted) == "http://127.0.0.1:8000"


@pytest.mark.parametrize(
    ("pattern", "url"),
    [
        ("EXAMPLE.com", "http://example.com/"),
        ("0x7f.1:8000", "http://127.0.0.1:8000/"),
        ("bücher.de", "http://xn--bcher-kva.de/"),
        ("*.Bücher.de", "http://shop.xn--bcher-kva.de/"),
        ("[::1]:8080", "http://[::1]:8080/"),
    ],
)
def test_domain_patterns_are_canonicalised_like_the_urls_they_match(pattern: str, url: str) -> None:
    assert DomainPattern.parse(pattern).matches(url)


def test_origins_are_read_as_the_browser_reads_them() -> None:
    assert url_origin("http://[::1]:8080/") == "http://[::1]:8080"
    assert url_origin("https://EXAMPLE.com/") == "https://example.com:443"
    assert url_origin("http://127.0.0.1:9000\\@127.0.0.1:8000/") is None
    assert url_origin("about:blank") is None
