"""Navigation targets end to end: the gate reads a URL as Chromium does and checks what loaded.

Two loopback sites: ``allowed`` (on the allowlist) and ``other`` (not). URLs that Python's
parser reads as the allowed site while Chromium reads them as the other one must never reach
the other server, whether a human is asked or an allow rule lets navigation through; a
redirect from the allowed site to the other one stops the worker with a ``denied`` outcome.
Real Chromium, real browser-use, a scripted model. Without Chromium these tests skip locally
and fail under ``CI=true``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from support.browser_run import approve_all, chromium_or_skip, run_task
from support.browser_site import BrowserPlan, BrowserSite, latest_page_state

from sandboxes.browser import BrowserPolicy, BrowserRule
from sandboxes.browser.config import DENIED_EXIT_CODE
from supervisor.ledger.models import ProposalStatus
from supervisor.store.provider import SQLModelProvider

pytestmark = pytest.mark.slow

URL_REFUSALS = {"url_ambiguous", "url_credentials", "url_unparsable"}
Step = Callable[[str], dict[str, Any]]


def WAIT(page: str) -> dict[str, Any]:
    return {"wait": {"seconds": 1}}


def navigate(url: str) -> Step:
    return lambda page: {"navigate": {"url": url}}


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_or_skip()


def two_way_urls(allowed: int, other: int) -> list[str]:
    """URLs Python reads as (or near) the allowed site that Chromium loads from the other."""
    return [
        f"http://127.0.0.1:{other}\\@127.0.0.1:{allowed}/",  # backslash ends the authority
        f"HTTP://127.0.0.1:{other}\\\\@127.0.0.1:{allowed}/form",
        f"http://0x7f.1:{other}\\@127.0.0.1:{allowed}/",  # IPv4 shorthand, then a backslash
        f"\thttp://127.0.0.1:{other}\\@127.0.0.1:{allowed}/",  # leading tab
        f"http://127.0.0.1:{other}\n\\@127.0.0.1:{allowed}/",  # newline inside
        f"http:127.0.0.1:{other}/",  # no slashes: Python sees no host at all
        f"http:\\\\127.0.0.1:{other}\\",
        f"http://127.0.0.1:{allowed}@127.0.0.1:{other}/",  # credentials disguising the host
    ]


def pages(site: BrowserSite) -> list[str]:
    """Paths the site served, without the browser's own favicon fetches."""
    return [hit.path for hit in site.seen() if hit.path != "/favicon.ico"]


def denied_navigations(provider: SQLModelProvider, worker_id: str) -> list[tuple[str, str]]:
    return [
        (str(event.payload["arguments"]["target_url"]), str(event.reason_code))
        for event in provider.ledger.trace_events(run_id=worker_id)
        if event.kind == "browser.action" and event.outcome_status == "denied"
    ]


def test_urls_read_two_ways_are_refused_even_when_a_rule_allows_navigation(
    provider: SQLModelProvider, chromium: str
) -> None:
    with BrowserSite() as allowed, BrowserSite() as other:
        forms = two_way_urls(allowed.port, other.port)
        steps: list[Step] = []
        for url in forms:  # a successful wait between refusals keeps browser-use going
            steps += [navigate(url), WAIT]
        plan = BrowserPlan([*steps, navigate(allowed.url("/"))])
        result, reviewer, model = run_task(
            allowed,
            provider,
            chromium,
            plan,
            approve_all,
            policy=BrowserPolicy(rules=(BrowserRule(action="navigate", verdict="allow"),)),
            max_steps=len(steps) + 2,
        )
        other_hits = other.seen()
        allowed_hits = pages(allowed)

    assert result.exit_code == 0, result
    assert other_hits == []
    assert reviewer.seen == []
    denied = denied_navigations(provider, result.worker_id)
    assert [url for url, _ in denied] == forms
    assert {code for _, code in denied} <= URL_REFUSALS
    assert "denied by policy (url_ambiguous): " in latest_page_state(model.requests[1].messages)
    # The control navigation still works, so the refusals are not a broken browser.
    assert allowed_hits == ["/"]


def test_a_reviewer_is_never_asked_to_approve_a_url_read_two_ways(
    provider: SQLModelProvider, chromium: str
) -> None:
    with BrowserSite() as allowed, BrowserSite() as other:
        two_way = two_way_urls(allowed.port, other.port)[0]
        plan = BrowserPlan(
            [
                lambda page: {"navigate": {"url": two_way}},
                lambda page: {"navigate": {"url": f"HTTP://127.0.0.1:{allowed.port}/swap/../"}},
            ]
        )
        result, reviewer, _ = run_task(allowed, provider, chromium, plan, approve_all)
        other_hits = other.seen()
        allowed_hits = pages(allowed)

    assert result.exit_code == 0, result
    assert other_hits == []
    (navigate,) = reviewer.by_tool("browser.navigate")
    assert navigate.arguments["url"] == f"HTTP://127.0.0.1:{allowed.port}/swap/../"
    assert navigate.arguments["target_url"] == allowed.url("/")
    assert navigate.arguments["target_origin"] == f"http://127.0.0.1:{allowed.port}"
    assert navigate.status is ProposalStatus.EXECUTED
    assert allowed_hits == ["/"]


def test_a_redirect_off_the_allowlist_stops_the_worker_with_denied(
    provider: SQLModelProvider, chromium: str
) -> None:
    with BrowserSite() as allowed, BrowserSite() as other:
        landing = other.url("/landing")
        start = allowed.url(f"/redirect?to={quote(landing, safe='')}")
        plan = BrowserPlan([lambda page: {"navigate": {"url": start}}])
        result, _, model = run_task(
            allowed,
            provider,
            chromium,
            plan,
            approve_all,
            policy=BrowserPolicy(rules=(BrowserRule(action="navigate", verdict="allow"),)),
        )
        other_hits = pages(other)

    assert (result.outcome, result.exit_code) == ("denied", DENIED_EXIT_CODE), result
    assert result.denial is not None
    assert (result.denial.code, result.denial.url) == ("navigation_left_allowlist", landing)
    # The redirect's own request cannot be held back; nothing after it happens.
    assert other_hits == ["/landing"]
    assert len(model.requests) == 1
    (process,) = [p for p in provider.ledger.list_processes() if p.process_id == result.worker_id]
    assert (process.status, process.exit_code) == ("stopped", DENIED_EXIT_CODE)
    (stop,) = [
        event
        for event in provider.ledger.trace_events(run_id=result.worker_id)
        if event.kind == "browser.navigation"
    ]
    assert (stop.outcome_status, stop.reason_code, stop.payload["url"]) == (
        "denied",
        "navigation_left_allowlist",
        landing,
    )
