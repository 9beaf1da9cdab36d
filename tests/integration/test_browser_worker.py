"""The gated browser worker end to end: real Chromium, real browser-use, a real loopback site.

A scripted OpenAI-compatible model drives browser-use's agent; a reviewer thread in the test
process decides each proposal through the ledger, as a human in the TUI would. Without Chromium
these tests skip locally and fail under ``CI=true``.
"""

from __future__ import annotations

import os
import re
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from support.browser_run import (
    RUN_TIMEOUT_S,
    Verdict,
    approve_all,
    chromium_or_skip,
    run_task,
)
from support.browser_site import BrowserPlan, BrowserSite, element_index, latest_page_state
from support.cli import run_cli

from sandboxes.browser import BrowserTask
from supervisor.canonical import canonical_json
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import ScriptedModel

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chromium() -> str:
    """Chromium's path; skip without it locally, fail without it under CI=true."""
    return chromium_or_skip()


Plan = BrowserPlan


def test_approved_actions_are_bound_to_url_and_element_and_submit_the_form(
    provider: SQLModelProvider, chromium: str
) -> None:
    with BrowserSite() as site:
        plan = Plan(
            [
                lambda page: {"navigate": {"url": site.url("/")}},
                lambda page: {"input": {"index": element_index(page, "name=q"), "text": "alice"}},
                lambda page: {
                    "input": {"index": element_index(page, "type=password"), "text": "hunter2"}
                },
                lambda page: {"click": {"index": element_index(page, "<button")}},
            ]
        )
        result, reviewer, _ = run_task(site, provider, chromium, plan, approve_all)
        posts = site.seen("POST")

    assert result.exit_code == 0, result
    assert [p.form for p in posts] == [{"q": ["alice"], "pw": ["hunter2"]}]

    (navigate,) = reviewer.by_tool("browser.navigate")
    assert navigate.arguments["target_url"] == site.url("/")
    assert navigate.arguments["target_origin"] == f"http://127.0.0.1:{site.port}"
    assert navigate.execution_target["browser"] == result.worker_id

    name_input, password_input = reviewer.by_tool("browser.input")
    assert name_input.execution_target["url"] == site.url("/")
    assert name_input.execution_target["element"]["attributes"]["name"] == "q"
    assert set(name_input.execution_target["element"]["box"]) == {"x", "y", "width", "height"}
    assert name_input.arguments["text"] == "alice"
    assert password_input.arguments["text"]["masked"] is True
    assert password_input.arguments["text"]["length"] == len("hunter2")

    (click,) = reviewer.by_tool("browser.click")
    assert click.execution_target["url"] == site.url("/")
    assert click.execution_target["element"]["tag"] == "button"
    assert click.execution_target["element"]["text"] == "Send"

    every = [navigate, name_input, password_input, click]
    assert all(p.status is ProposalStatus.EXECUTED for p in every)
    assert all("hunter2" not in canonical_json(p.model_dump(mode="json")) for p in every)

    (process,) = [p for p in provider.ledger.list_processes() if p.process_id == result.worker_id]
    assert (process.kind, process.status, process.exit_code) == ("browser_worker", "exited", 0)


def test_a_rejected_click_never_submits_the_form(provider: SQLModelProvider, chromium: str) -> None:
    def reject_clicks(proposal: Proposal) -> Verdict:
        if proposal.tool_name == "browser.click":
            return ("reject", "do not submit yet")
        return ("approve", "fine")

    with BrowserSite() as site:
        plan = Plan(
            [
                lambda page: {"navigate": {"url": site.url("/")}},
                lambda page: {"input": {"index": element_index(page, "name=q"), "text": "alice"}},
                lambda page: {"click": {"index": element_index(page, "<button")}},
            ]
        )
        result, reviewer, model = run_task(site, provider, chromium, plan, reject_clicks)
        posts = site.seen("POST")

    assert result.exit_code == 0, result
    assert posts == []
    (click,) = reviewer.by_tool("browser.click")
    assert click.status is ProposalStatus.REJECTED
    after_click = latest_page_state(model.requests[3].messages)
    assert "rejected by a human reviewer: do not submit yet" in after_click


def test_navigation_outside_the_allowed_domains_is_denied_without_asking(
    provider: SQLModelProvider, chromium: str
) -> None:
    with BrowserSite() as site, BrowserSite() as elsewhere:
        plan = Plan(
            [
                lambda page: {"navigate": {"url": elsewhere.url("/", host="localhost")}},
                lambda page: {"navigate": {"url": elsewhere.url("/")}},
                lambda page: {"navigate": {"url": f"http://localhost:{site.port}/"}},
            ]
        )
        result, reviewer, model = run_task(site, provider, chromium, plan, approve_all)
        elsewhere_hits = elsewhere.seen()
        site_hits = site.seen()

    assert result.exit_code == 0, result
    assert elsewhere_hits == []
    assert site_hits == []
    assert reviewer.seen == []
    denied = [
        event
        for event in provider.ledger.trace_events(run_id=result.worker_id)
        if event.outcome_status == "denied"
    ]
    assert [event.payload["arguments"]["target_url"] for event in denied] == [
        elsewhere.url("/", host="localhost"),
        elsewhere.url("/"),
        f"http://localhost:{site.port}/",
    ]
    assert "denied by policy" in latest_page_state(model.requests[1].messages)


def test_an_approval_does_not_carry_over_to_a_changed_element(
    provider: SQLModelProvider, chromium: str
) -> None:
    def approve_clicks_late(proposal: Proposal) -> Verdict:
        if proposal.tool_name == "browser.click":
            return ("wait-approve", "approved after the page changed")
        return ("approve", "fine")

    with BrowserSite(swap_after_ms=3000) as site:
        plan = Plan(
            [
                lambda page: {"navigate": {"url": site.url("/swap")}},
                lambda page: {"click": {"index": element_index(page, "<button")}},
            ]
        )
        result, reviewer, model = run_task(
            site, provider, chromium, plan, approve_clicks_late, path="/swap"
        )
        posts = site.seen("POST")

    assert result.exit_code == 0, result
    assert posts == []
    (click,) = reviewer.by_tool("browser.click")
    assert click.execution_target["element"]["text"] == "Send"
    assert click.status is ProposalStatus.CANCELLED
    assert "page or element changed" in latest_page_state(model.requests[2].messages)


def test_stopping_the_worker_withdraws_its_pending_proposal_and_ends_chromium(
    provider: SQLModelProvider, chromium: str
) -> None:
    with BrowserSite() as site:
        plan = Plan([lambda page: {"navigate": {"url": site.url("/")}}])
        with ScriptedModel(plan) as model:
            handle = BrowserTask(
                "Open the site",
                allowed_domains=[f"127.0.0.1:{site.port}"],
                model=model.model_name,
                base_url=model.base_url,
                api_key="sk-test",
                ledger_url=provider.url,
                chromium_path=chromium,
                approval_timeout=60.0,
            ).start()
            try:
                pending = _wait_for_pending(provider.ledger, timeout=RUN_TIMEOUT_S / 2)
                (process,) = [
                    p for p in provider.ledger.list_processes() if p.process_id == handle.process_id
                ]
                assert (process.kind, process.pid, process.status) == (
                    "browser_worker",
                    handle.pid,
                    "running",
                )
            finally:
                result = handle.stop()
        site_hits = site.seen()

    (process,) = [p for p in provider.ledger.list_processes() if p.process_id == handle.process_id]
    assert (result.exit_code, process.status) == (143, "stopped"), result
    assert site_hits == []
    assert provider.ledger.get(pending.proposal_id).status is ProposalStatus.CANCELLED
    assert _group_ends(handle.pid, timeout=10.0), "Chromium outlived the stopped worker"


def _group_ends(pgid: int, timeout: float) -> bool:
    """True once no process is left in the worker's process group (Chromium included)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def _wait_for_pending(ledger: ApprovalLedger, timeout: float) -> Proposal:
    deadline = time.monotonic() + timeout
    cursor = 0
    while time.monotonic() < deadline:
        pending = ledger.list(status="pending").items
        if pending:
            return pending[0]
        records = ledger.wait_for_change(cursor, timeout=0.5)
        if records:
            cursor = records[-1].seq
    raise AssertionError("the worker filed no proposal in time")


def test_sensitive_data_reaches_the_page_and_nothing_else(
    provider: SQLModelProvider, chromium: str
) -> None:
    secret = "Sensitive-Hunter2-Zq8"
    with BrowserSite() as site:
        plan = Plan(
            [
                lambda page: {"navigate": {"url": site.url("/")}},
                lambda page: {"input": {"index": element_index(page, "name=q"), "text": "alice"}},
                lambda page: {
                    "input": {
                        "index": element_index(page, "type=password"),
                        "text": "<secret>pw</secret>",
                    }
                },
                lambda page: {"click": {"index": element_index(page, "<button")}},
            ]
        )
        result, reviewer, model = run_task(
            site, provider, chromium, plan, approve_all, sensitive_data={"pw": secret}
        )
        posts = site.seen("POST")

    assert result.exit_code == 0, result
    assert [p.form for p in posts] == [{"q": ["alice"], "pw": [secret]}]
    (_, password_input) = reviewer.by_tool("browser.input")
    assert password_input.arguments["text"] == "<secret>pw</secret>"
    stored = [p.model_dump(mode="json") for p in reviewer.seen] + [
        e.model_dump(mode="json") for e in provider.ledger.trace_events(limit=10_000)
    ]
    assert secret not in canonical_json(stored)
    assert all(secret not in canonical_json(request.body) for request in model.requests)
    assert secret not in result.model_dump_json()


def test_an_operator_extend_keeps_the_worker_waiting_for_the_decision(
    provider: SQLModelProvider, chromium: str
) -> None:
    def extend_then_approve(proposal: Proposal) -> Verdict:
        return ("extend-approve", "approved after the first expiry")

    with BrowserSite() as site:
        plan = Plan([lambda page: {"navigate": {"url": site.url("/")}}])
        result, reviewer, _ = run_task(
            site, provider, chromium, plan, extend_then_approve, approval_timeout=4.0
        )
        site_hits = site.seen("GET")

    assert result.exit_code == 0, result
    (navigate,) = reviewer.by_tool("browser.navigate")
    assert navigate.status is ProposalStatus.EXECUTED, navigate.decision_reason
    assert navigate.decided_at is not None
    assert navigate.decided_at > navigate.created_at + timedelta(seconds=4)  # past the first TTL
    assert [hit.path for hit in site_hits if hit.path != "/favicon.ico"] == ["/"]


def test_sensitive_data_in_a_loaded_url_stays_out_of_the_trace_and_the_model(
    provider: SQLModelProvider, chromium: str
) -> None:
    secret = "Se'n\"si tivé-Q7x"  # Chromium writes it percent-encoded into the URL it loads
    with BrowserSite() as site:
        plan = Plan(
            [
                lambda page: {"navigate": {"url": site.url("/?q=<secret>pw</secret>")}},
                lambda page: {"scroll": {"down": True, "pages": 0.5}},
            ]
        )
        result, _, model = run_task(
            site, provider, chromium, plan, approve_all, sensitive_data={"pw": secret}
        )
        (loaded,) = [hit for hit in site.seen("GET") if hit.path != "/favicon.ico"]

    assert result.exit_code == 0, result
    assert parse_qs(urlsplit(loaded.path).query) == {"q": [secret]}  # the page got the value
    events = provider.ledger.trace_events(run_id=result.worker_id)
    scrolled = [event for event in events if event.tool == "browser.scroll"]
    assert [event.payload["target"]["url"] for event in scrolled] == [site.url("/?q=[REDACTED]")]
    stored = canonical_json([event.model_dump(mode="json") for event in events])
    assert "Q7x" not in stored
    # The model saw the page's URL with the placeholder, never the value in any form.
    seen = [canonical_json(request.body) for request in model.requests]
    tab = re.compile(r"Tab \w+: " + re.escape(site.url("/?q=<secret>pw</secret>")) + " ")
    assert any(tab.search(body) for body in seen)  # the tab list, as browser-use shows it
    assert not any("Q7x" in body for body in seen)


def test_the_ledgers_rules_decide_browser_actions_without_asking(
    provider: SQLModelProvider, chromium: str, tmp_path: Path
) -> None:
    """One policy, applied through the CLI, allows the navigation and the typing and denies the
    submit: nothing reaches the reviewer (who would reject everything), every decision is a
    recorded proposal naming its rule, and the model is told the deny rule's reason."""

    def nobody_is_asked(proposal: Proposal) -> Verdict:
        return ("reject", "the reviewer was asked")

    with BrowserSite() as site:
        policy = tmp_path / "policy.toml"
        policy.write_text(
            '[[rules]]\nname = "browse the site"\nverdict = "allow"\nreason = "Reading is fine"\n'
            f'tool = ["browser.navigate", "browser.input"]\nsites = ["127.0.0.1:{site.port}"]\n\n'
            '[[rules]]\nname = "no submits"\nverdict = "deny"\n'
            'reason = "Agents do not submit forms"\ntool = "browser.click"\n',
            encoding="utf-8",
        )
        provider.ledger.head()  # the ledger exists before a policy is applied to it
        applied = run_cli("policy", "apply", str(policy), "--db", provider.url)
        assert applied.returncode == 0, applied.stderr
        plan = Plan(
            [
                lambda page: {"navigate": {"url": site.url("/")}},
                lambda page: {"input": {"index": element_index(page, "name=q"), "text": "alice"}},
                lambda page: {"click": {"index": element_index(page, "<button")}},
            ]
        )
        result, reviewer, model = run_task(site, provider, chromium, plan, nobody_is_asked)
        posts = site.seen("POST")

    assert result.exit_code == 0, result
    assert posts == []
    assert reviewer.seen == []
    decided = {p.tool_name: p for p in provider.ledger.list(limit=50).items}
    assert decided["browser.navigate"].status is ProposalStatus.EXECUTED
    assert decided["browser.navigate"].decided_by == "rule browse the site (policy v1)"
    assert decided["browser.input"].status is ProposalStatus.EXECUTED
    assert decided["browser.click"].status is ProposalStatus.REJECTED
    assert decided["browser.click"].decided_by == "rule no submits (policy v1)"
    after_click = latest_page_state(model.requests[3].messages)
    assert "denied by policy (rule no submits (policy v1)): Agents do not submit forms" in (
        after_click
    )
