"""A human's edit of a browser action, end to end: real Chromium, browser-use, a loopback site.

The reviewer thread edits a proposal through the ledger (as ``e`` in the TUI does) and approves
the edit. The gate runs the edited action only when it resolves, on the page as it is now, to
exactly what was approved and the policy allows it; otherwise it is refused with a typed code.
Without Chromium these tests skip locally and fail under ``CI=true``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from support.browser_run import Verdict, chromium_or_skip, run_task
from support.browser_site import BrowserPlan, BrowserSite, element_index, latest_page_state

from sandboxes.browser.edits import EDIT_MISMATCH, EDIT_NOT_ALLOWED
from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.store.provider import SQLModelProvider

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chromium() -> str:
    """Chromium's path; skip without it locally, fail without it under CI=true."""
    return chromium_or_skip()


def _edit_once(
    tool: str, changes: dict[str, object]
) -> tuple[list[Proposal], Callable[[Proposal], Verdict]]:
    """A reviewer that edits the first ``tool`` proposal with ``changes`` and approves the rest
    (the edit included); returns the list of edited originals it saw and the decide function."""
    edited: list[Proposal] = []

    def decide(proposal: Proposal) -> Verdict:
        if proposal.tool_name == tool and proposal.supersedes_id is None and not edited:
            edited.append(proposal)
            return ("edit", json.dumps(changes))
        return ("approve", "fine")

    return edited, decide


def _chain(provider: SQLModelProvider, original: Proposal) -> tuple[Proposal, Proposal]:
    old = provider.ledger.get(original.proposal_id)
    assert old.status is ProposalStatus.SUPERSEDED and old.superseded_by_id is not None
    return old, provider.ledger.get(old.superseded_by_id)


def test_an_approved_edit_of_typed_text_is_what_reaches_the_page(
    provider: SQLModelProvider, chromium: str
) -> None:
    edited, decide = _edit_once("browser.input", {"text": "bob"})
    with BrowserSite() as site:
        plan = BrowserPlan(
            [
                lambda page: {"navigate": {"url": site.url("/")}},
                lambda page: {"input": {"index": element_index(page, "name=q"), "text": "alice"}},
                lambda page: {"click": {"index": element_index(page, "<button")}},
            ]
        )
        result, _, model = run_task(site, provider, chromium, plan, decide)
        posts = site.seen("POST")

    assert result.exit_code == 0, result
    assert [p.form for p in posts] == [{"q": ["bob"]}]  # the edit ran; "alice" never did
    old, new = _chain(provider, edited[0])
    assert (old.arguments["text"], new.arguments["text"]) == ("alice", "bob")
    assert (
        new.status is ProposalStatus.EXECUTED and provider.ledger.execution(old.proposal_id) is None
    )
    after_input = latest_page_state(model.requests[2].messages)
    assert '"edited_by_human"' in after_input
    assert '{"new":"bob","old":"alice","path":"$.text"}' in after_input


def test_an_edited_navigation_off_the_allowlist_is_refused_and_never_loads(
    provider: SQLModelProvider, chromium: str
) -> None:
    with BrowserSite() as site, BrowserSite() as elsewhere:
        away = elsewhere.url("/")  # another port: not on the allowlist
        origin = away.rsplit("/", 1)[0]
        edited, decide = _edit_once(
            "browser.navigate", {"url": away, "target_url": away, "target_origin": origin}
        )
        plan = BrowserPlan([lambda page: {"navigate": {"url": site.url("/")}}])
        result, _, model = run_task(site, provider, chromium, plan, decide)
        elsewhere_hits = elsewhere.seen()

    assert result.exit_code == 0, result
    assert elsewhere_hits == []
    _, new = _chain(provider, edited[0])
    assert new.status is ProposalStatus.CANCELLED  # the approval was withdrawn, nothing ran
    assert provider.ledger.execution(new.proposal_id) is None
    refused = [
        e for e in provider.ledger.trace_events(run_id=result.worker_id)
        if e.outcome_status == "refused"
    ]  # fmt: skip
    assert [e.reason_code for e in refused] == [EDIT_NOT_ALLOWED]
    assert f"refused ({EDIT_NOT_ALLOWED})" in latest_page_state(model.requests[1].messages)


def test_an_edit_that_leaves_a_derived_field_stale_is_refused_as_a_mismatch(
    provider: SQLModelProvider, chromium: str
) -> None:
    with BrowserSite() as site:
        # The url changes but target_url (what the gate reads from it) is left as it was.
        edited, decide = _edit_once("browser.navigate", {"url": site.url("/other")})
        plan = BrowserPlan([lambda page: {"navigate": {"url": site.url("/")}}])
        result, _, model = run_task(site, provider, chromium, plan, decide)
        hits = site.seen()

    assert result.exit_code == 0, result
    assert hits == []  # neither the original nor the edit loaded
    _, new = _chain(provider, edited[0])
    assert new.status is ProposalStatus.CANCELLED
    assert f"refused ({EDIT_MISMATCH})" in latest_page_state(model.requests[1].messages)
