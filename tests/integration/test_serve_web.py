"""``supervisor serve`` end to end: real server subprocess, real SQLite ledger, real agent,
real headless Chromium.

An agent pauses on a call whose argument carries a bidi override, a control character and a
``<script>`` tag; an operator made with ``supervisor operators add`` logs in from Chromium,
opens the decision page, reads the arguments (escaped as in the TUI), waits the settle time and
approves; the waiting agent resumes and runs the call once; the audit names the operator and
``via=web``. The HTTP tests then refuse a replayed or stale link, a missing or wrong CSRF token,
another origin, a wrong or revoked token, a decision before the settle time and an expired
proposal. With ``SUPERVISOR_UPDATE_SCREENSHOTS=1`` the Chromium test also writes the phone and
desktop screenshots under docs/images/.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.browser_run import chromium_or_skip
from support.chromium_page import ChromiumPage
from support.cli import run_cli
from support.runtime_runs import pause, start_waiter
from support.web_serve import Served, add_operator, error_code, hidden_fields, login, serve

from supervisor.ledger.models import Proposal, ProposalStatus
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import CallTools, Reply, ScriptedModel, ToolCall, Turn

TESTS_DIR = Path(__file__).resolve().parents[1]
DOCS_IMAGES = TESTS_DIR.parent / "docs" / "images"
#: A customer name an agent could send: bidi override (U+202E), BEL, and markup.
HOSTILE_NAME = "Ada \u202eevil\x07 <script>alert(1)</script>"
SETTLE = 1.0


def _env(tmp_path: Path, url: str, model: ScriptedModel) -> dict[str, str]:
    env = dict(os.environ)
    env.update(model.env())
    env["SUPERVISOR_DB"] = url
    env["SIDE_EFFECT_FILE"] = str(tmp_path / "side_effects.log")
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), env.get("PYTHONPATH", "")])
    return env


def _decision_records(url: str, proposal_id: str) -> list[dict[str, Any]]:
    with SQLModelProvider(url) as provider:
        records = provider.ledger.events_since(0, 10_000)
    return [
        {"action": record.action, "actor": record.actor, **record.payload}
        for record in records
        if record.subject == proposal_id and record.action in ("approve", "reject")
    ]


def test_an_operator_approves_from_chromium_and_the_agent_resumes(tmp_path: Path) -> None:
    chromium = chromium_or_skip()
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    call = ToolCall("create_customer", {"name": HOSTILE_NAME, "email": "ada@example.com"})
    script: list[Turn] = [CallTools([call]), Reply("Created as approved.")]
    with ScriptedModel(script) as model:
        env = _env(tmp_path, url, model)
        proposal_id = pause(env)
        waiter = start_waiter(env, proposal_id)
        token = add_operator(url, "ada", env=env)
        with SQLModelProvider(url) as provider:
            args_hash = provider.ledger.get(proposal_id).args_hash
        with serve(url, env=env, settle=SETTLE) as served, ChromiumPage(chromium) as page:
            page.open(served.base_url + "/")
            assert page.url().endswith("/login")
            page.type_into("#token", token)
            page.click("#login")
            assert page.url() == served.base_url + "/"
            assert "create_customer" in page.text("#pending")
            page.click("#pending a")
            assert f"/p/{proposal_id}?h={args_hash}" in page.url()
            shown = page.text("#arguments")
            # The TUI's escapes, as text: the override and BEL are visible, the tag is not markup.
            assert "Ada \\u202eevil\\u0007 <script>alert(1)</script>" in shown
            assert "\u202e" not in shown and "\x07" not in shown
            assert page.evaluate("document.scripts.length") == 0
            assert page.text("#args-hash") == args_hash
            assert page.text("#agent") == "ops-agent"
            _screenshots(page, tmp_path)
            time.sleep(SETTLE)
            page.click("#approve")
            assert "approved" in page.text("#outcome")
            assert page.text("#approver") == "ada"
            # The link decides nothing any more: no forms, the state says who decided.
            page.open(f"{served.base_url}/p/{proposal_id}?h={args_hash}")
            assert " by ada at " in page.text("#state")
            assert page.evaluate("document.querySelector('#approve')") is None
            _tui_draws(page, served)
        out, err = waiter.communicate(timeout=120)
    assert waiter.returncode == 0, err
    resumed = json.loads(out.strip().splitlines()[-1])
    assert resumed["status"] == "executed" and resumed["ok"] is True
    assert resumed["assistant_response"] == "Created as approved."
    side_effects = (tmp_path / "side_effects.log").read_text(encoding="utf-8").splitlines()
    assert side_effects == [f"create_customer {HOSTILE_NAME} ada@example.com"]
    (record,) = _decision_records(url, proposal_id)
    assert record["action"] == "approve" and record["actor"] == "ada"
    assert record["approver_id"] == "ada" and record["context"]["via"] == "web"
    assert record["args_hash"] == args_hash
    verified = run_cli("audit", "verify", "--db", url, env=env)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _tui_draws(page: ChromiumPage, served: Served) -> None:
    """``/tui`` runs the real TUI for the logged-in operator: its first bytes reach the page."""
    page.open(served.base_url + "/tui/")
    deadline = time.monotonic() + 60
    while "-first-byte" not in str(page.evaluate("document.body.className")):
        assert time.monotonic() < deadline, "the TUI sent nothing to the browser"
        time.sleep(0.2)


def _screenshots(page: ChromiumPage, tmp_path: Path) -> None:
    """The decision page at phone and desktop widths (copied to docs/ when asked)."""
    phone, desktop = tmp_path / "decision-phone.png", tmp_path / "decision-desktop.png"
    page.screenshot(phone, 390, 844, mobile=True)
    # At 390 px nothing is cut off: the arguments wrap instead of scrolling sideways.
    page.call("Emulation.setDeviceMetricsOverride",
              {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})  # fmt: skip
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.call("Emulation.clearDeviceMetricsOverride", {})
    page.screenshot(desktop, 1280, 800, mobile=False)
    for shot in (phone, desktop):
        assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    if os.environ.get("SUPERVISOR_UPDATE_SCREENSHOTS") == "1":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(phone, DOCS_IMAGES / phone.name)
        shutil.copyfile(desktop, DOCS_IMAGES / desktop.name)


# -- HTTP-level refusals (one server for the module) ------------------------------------------


class Site:
    """The module's server, ledger and operator token."""

    def __init__(self, url: str, served: Served, token: str) -> None:
        self.url = url
        self.served = served
        self.token = token

    def propose(self, name: str, ttl_seconds: float | None = None) -> Proposal:
        with SQLModelProvider(self.url) as provider:
            return provider.ledger.propose(
                "send_email", "s" * 64, {"to": "ops@example.com", "subject": name},
                owner="mail-agent", ttl_seconds=ttl_seconds,
            )  # fmt: skip

    def get(self, proposal_id: str) -> Proposal:
        with SQLModelProvider(self.url) as provider:
            return provider.ledger.get(proposal_id)

    @contextmanager
    def client(self) -> Iterator[httpx.Client]:
        """A client logged in as the module's operator."""
        with self.served.client() as client:
            assert login(client, self.token).status_code == 303
            yield client


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("serve")
    url = f"sqlite:///{folder / 'ledger.db'}"
    token = add_operator(url, "grace")
    with serve(url, settle=SETTLE) as served:
        yield Site(url, served, token)


def _page(client: httpx.Client, proposal: Proposal) -> tuple[httpx.Response, dict[str, str]]:
    response = client.get(f"/p/{proposal.proposal_id}", params={"h": proposal.args_hash})
    return response, hidden_fields(response.text)


def _decide(
    client: httpx.Client, proposal: Proposal, form: dict[str, str], **changes: str | None
) -> httpx.Response:
    data = {**form, "action": "approve", "reason": "", **changes}
    body = {key: value for key, value in data.items() if value is not None}
    return client.post(f"/p/{proposal.proposal_id}/decide", data=body)


def test_a_decision_link_decides_once(site: Site) -> None:
    proposal = site.propose("once")
    with site.client() as client:
        _, form = _page(client, proposal)
        time.sleep(SETTLE)
        first = _decide(client, proposal, form)
        assert first.status_code == 200, first.text
        replayed = _decide(client, proposal, form)
        assert replayed.status_code == 409
        assert error_code(replayed.text) == "approval_already_decided"
        again, fields = _page(client, proposal)
    assert again.status_code == 200 and "view" not in fields
    decided = site.get(proposal.proposal_id)
    assert decided.status is ProposalStatus.APPROVED and decided.approver_id == "grace"
    assert decided.approver_context is not None and decided.approver_context.via == "web"


def test_a_link_for_other_arguments_is_refused(site: Site) -> None:
    proposal = site.propose("stale")
    with site.client() as client:
        wrong = client.get(f"/p/{proposal.proposal_id}", params={"h": "0" * 16})
        assert wrong.status_code == 409 and error_code(wrong.text) == "stale_link"
        short = client.get(f"/p/{proposal.proposal_id}", params={"h": proposal.args_hash[:8]})
        assert short.status_code == 409 and error_code(short.text) == "stale_link"
        bare = client.get(f"/p/{proposal.proposal_id}")
        assert bare.status_code == 400 and error_code(bare.text) == "link_incomplete"
        _, form = _page(client, proposal)
        time.sleep(SETTLE)
        other = _decide(client, proposal, form, args_hash="f" * 64)
        assert other.status_code == 409 and error_code(other.text) == "stale_link"
        # An edit supersedes the proposal: the page shown before it decides nothing.
        with SQLModelProvider(site.url) as provider:
            edited = provider.ledger.edit(
                proposal.proposal_id, {"to": "ops@example.com", "subject": "edited"}, "desk"
            )
        after_edit = _decide(client, proposal, form)
        assert after_edit.status_code == 409
        assert error_code(after_edit.text) == "approval_already_decided"
    assert site.get(proposal.proposal_id).status is ProposalStatus.SUPERSEDED
    assert site.get(edited.proposal_id).status is ProposalStatus.PENDING


@pytest.mark.parametrize(("csrf", "code"), [(None, "csrf_failed"), ("x" * 43, "csrf_failed")])
def test_a_decision_without_this_sessions_csrf_token_is_refused(
    site: Site, csrf: str | None, code: str
) -> None:
    proposal = site.propose(f"csrf-{csrf is None}")
    with site.client() as client:
        _, form = _page(client, proposal)
        time.sleep(SETTLE)
        refused = _decide(client, proposal, form, csrf=csrf)
        assert refused.status_code == 403 and error_code(refused.text) == code
        # Another operator session's token is not this session's either.
        with site.client() as other:
            _, other_form = _page(other, proposal)
        crossed = _decide(client, proposal, form, csrf=other_form["csrf"])
        assert crossed.status_code == 403 and error_code(crossed.text) == "csrf_failed"
    assert site.get(proposal.proposal_id).status is ProposalStatus.PENDING


def test_a_decision_from_another_origin_is_refused(site: Site) -> None:
    proposal = site.propose("origin")
    with site.client() as client:
        _, form = _page(client, proposal)
        time.sleep(SETTLE)
        url = f"/p/{proposal.proposal_id}/decide"
        data = {**form, "action": "approve"}
        evil = client.post(url, data=data, headers={"Origin": "http://evil.example"})
        assert evil.status_code == 403 and error_code(evil.text) == "origin_refused"
        del client.headers["Origin"]
        unnamed = client.post(url, data=data)
        assert unnamed.status_code == 403 and error_code(unnamed.text) == "origin_refused"
    assert site.get(proposal.proposal_id).status is ProposalStatus.PENDING


def test_a_wrong_or_revoked_token_gets_no_session(site: Site) -> None:
    with site.served.client() as client:
        wrong = login(client, site.token[:-2] + "xx")
        assert wrong.status_code == 401 and "invalid_operator_token" in wrong.text
        assert "supervisor_session" not in client.cookies
        assert client.get("/").status_code == 303
    token = add_operator(site.url, "leaver")
    proposal = site.propose("revoked")
    with site.served.client() as client:
        assert login(client, token).status_code == 303
        _, form = _page(client, proposal)
        done = run_cli("operators", "revoke", "leaver", "--db", site.url)
        assert done.returncode == 0, done.stderr
        time.sleep(SETTLE)
        refused = _decide(client, proposal, form)
        assert refused.status_code == 401 and error_code(refused.text) == "login_required"
        assert client.get("/").headers["location"] == "/login"
    with site.served.client() as client:
        again = login(client, token)
        assert again.status_code == 401 and "invalid_operator_token" in again.text
    assert site.get(proposal.proposal_id).status is ProposalStatus.PENDING
    listed = run_cli("operators", "list", "--json", "--db", site.url)
    operators = {item["name"]: item for item in json.loads(listed.stdout)["operators"]}
    assert operators["leaver"]["active"] is False and operators["grace"]["active"] is True
    assert operators["grace"]["last_login_at"] is not None
    verified = run_cli("audit", "verify", "--db", site.url)  # operator records are chained too
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_decision_before_the_settle_time_is_refused(site: Site) -> None:
    proposal = site.propose("settle")
    with site.client() as client:
        _, form = _page(client, proposal)
        early = _decide(client, proposal, form)
        assert early.status_code == 409 and error_code(early.text) == "decided_too_soon"
        assert site.get(proposal.proposal_id).status is ProposalStatus.PENDING
        time.sleep(SETTLE)
        assert _decide(client, proposal, form).status_code == 200
    assert site.get(proposal.proposal_id).status is ProposalStatus.APPROVED


def test_an_expired_proposal_is_refused(site: Site) -> None:
    proposal = site.propose("expires", ttl_seconds=SETTLE + 0.5)
    with site.client() as client:
        _, form = _page(client, proposal)
        assert "view" in form
        time.sleep(SETTLE + 1.0)
        late = _decide(client, proposal, form)
        assert late.status_code == 410 and error_code(late.text) == "approval_expired"
        page, fields = _page(client, proposal)
    assert "expired" in page.text and "view" not in fields
    assert site.get(proposal.proposal_id).status is not ProposalStatus.APPROVED


def test_a_rejection_needs_a_reason_and_records_the_operator(site: Site) -> None:
    proposal = site.propose("reject")
    with site.client() as client:
        _, form = _page(client, proposal)
        time.sleep(SETTLE)
        bare = _decide(client, proposal, form, action="reject", reason=" ")
        assert bare.status_code == 400 and error_code(bare.text) == "reason_required"
        done = _decide(client, proposal, form, action="reject", reason="not today")
        assert done.status_code == 200
    rejected = site.get(proposal.proposal_id)
    assert rejected.status is ProposalStatus.REJECTED and rejected.approver_id == "grace"
    assert rejected.decision_reason == "not today"


def test_the_session_cookie_and_headers_are_strict(site: Site) -> None:
    with site.served.client() as client:
        response = login(client, site.token)
        cookie = response.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        assert "Secure" not in cookie  # plain loopback HTTP; --public-url https:// sets it
        page = client.get("/")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp
    assert "frame-ancestors 'none'" in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"
    assert 'name="viewport"' in page.text and "http" not in page.text.split("<main>")[0]


def test_the_tui_is_only_for_logged_in_operators(site: Site) -> None:
    with site.served.client() as client:
        anonymous = client.get("/tui/")
        assert anonymous.status_code == 303 and anonymous.headers["location"] == "/login"
        assert client.get("/tui/ws").status_code == 303
    with site.client() as client:
        assert client.get("/tui").headers["location"] == "/tui/"
        page = client.get("/tui/")
        assert page.status_code == 200
        assert "js/textual.js" in page.text and "googleapis" not in page.text
        assert f"ws://127.0.0.1:{site.served.base_url.rsplit(':', 1)[1]}/tui/ws" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]


def test_another_host_name_is_refused(site: Site) -> None:
    with site.served.client() as client:
        response = client.get("/login", headers={"Host": "rebound.example"})
    assert response.status_code == 421 and error_code(response.text) == "host_refused"


def test_serve_refuses_a_public_address_without_a_tls_proxy(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    done = run_cli("serve", "--host", "0.0.0.0", "--db", url)
    assert done.returncode == 2
    assert "error [serve_not_loopback]" in done.stderr and "reverse proxy" in done.stderr
    plain = run_cli("serve", "--host", "0.0.0.0", "--public-url", "http://x.example", "--db", url)
    assert plain.returncode == 2 and "error [invalid_public_url]" in plain.stderr


def test_operators_cli_errors_have_stable_codes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    token = add_operator(url, "ada")
    again = run_cli("operators", "add", "ada", "--db", url)
    assert again.returncode == 2 and "error [operator_exists]" in again.stderr
    missing = run_cli("operators", "revoke", "bob", "--db", url)
    assert missing.returncode == 2 and "error [operator_not_found]" in missing.stderr
    bad = run_cli("operators", "add", "Ada Lovelace", "--db", url)
    assert bad.returncode == 2 and "error [invalid_operator_name]" in bad.stderr
    listed = run_cli("operators", "list", "--db", url)
    assert listed.returncode == 0 and "ada  active" in listed.stdout
    assert token not in listed.stdout
    with SQLModelProvider(url) as provider:
        records = [r for r in provider.ledger.events_since(0, 100) if r.subject == "operator:ada"]
        stored = provider.engine.connect().exec_driver_sql("SELECT token_hash FROM operator")
        (token_hash,) = stored.one()
    assert [record.action for record in records] == ["operator_add"]
    assert token not in json.dumps([record.payload for record in records])
    assert token_hash != token and len(token_hash) == 64
