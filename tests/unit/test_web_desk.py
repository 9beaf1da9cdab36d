"""The web decision desk and its checks, without a server: a real SQLite ledger, a fixed
monotonic clock for the settle time, the sessions, the Origin/Host rules and the escaping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.cli.serve import NotLoopback, PublicUrlInvalid, check_bind
from supervisor.ledger.errors import ApprovalAlreadyDecided
from supervisor.ledger.models import ProposalStatus
from supervisor.ledger.service import ApprovalLedger
from supervisor.store.provider import SQLModelProvider
from supervisor.web.desk import DecisionDesk
from supervisor.web.errors import DecidedTooSoon, LinkStale, PageNotShown
from supervisor.web.pages import shown
from supervisor.web.security import Origins
from supervisor.web.sessions import SessionStore


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[ApprovalLedger]:
    with SQLModelProvider(f"sqlite:///{tmp_path / 'ledger.db'}") as provider:
        yield provider.ledger


def test_a_page_decides_once_after_the_settle_time_as_the_operator(ledger: ApprovalLedger) -> None:
    clock = Clock()
    desk = DecisionDesk(ledger, settle_seconds=0.5, clock=clock)
    session = SessionStore(3600, clock).open("ada")
    proposal = ledger.propose("send", "s" * 64, {"to": "x\u202e"})
    page = desk.show(session, proposal.proposal_id, proposal.args_hash[:12])
    assert page.view is not None and page.argument_lines[1] == '  "to": "x\\u202e"'
    view_id = page.view.view_id

    def decide(args_hash: str = proposal.args_hash, view: str = view_id) -> object:
        return desk.decide(session, proposal.proposal_id, view_id=view, args_hash=args_hash,
                           action="approve", reason="")  # fmt: skip

    clock.now += 0.4
    with pytest.raises(DecidedTooSoon):
        decide()
    clock.now += 0.2
    with pytest.raises(LinkStale):
        decide(args_hash="0" * 64)
    with pytest.raises(PageNotShown):
        decide(view="not-a-view")
    decided = decide()
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.APPROVED
    assert getattr(decided, "approver_id", None) == "ada"
    context = ledger.get(proposal.proposal_id).approver_context
    assert context is not None and context.via == "web"
    with pytest.raises(ApprovalAlreadyDecided):
        decide()
    again = desk.show(session, proposal.proposal_id, proposal.args_hash)
    assert again.view is None


def test_a_link_needs_enough_of_the_current_hash(ledger: ApprovalLedger) -> None:
    desk = DecisionDesk(ledger, settle_seconds=0.0)
    session = SessionStore(3600).open("ada")
    proposal = ledger.propose("send", "s" * 64, {"to": "x"})
    for given in ("", proposal.args_hash[:11], "f" * 64):
        with pytest.raises(LinkStale):
            desk.show(session, proposal.proposal_id, given)


def test_sessions_expire_and_end_with_their_operator() -> None:
    clock = Clock()
    store = SessionStore(10, clock)
    ada, bob = store.open("ada"), store.open("bob")
    assert store.get(ada.session_id) is ada and ada.csrf_matches(ada.csrf_token)
    assert not ada.csrf_matches(bob.csrf_token) and not ada.csrf_matches(None)
    store.close_operator("bob")
    assert store.get(bob.session_id) is None
    clock.now += 10
    assert store.get(ada.session_id) is None


def test_only_this_servers_hosts_and_origins_pass() -> None:
    local = Origins.for_server("127.0.0.1", 8470, None)
    assert local.host_ok("127.0.0.1:8470") and local.host_ok("localhost:8470")
    assert not local.host_ok("evil.example:8470") and not local.host_ok(None)
    assert local.origin_ok("http://localhost:8470", None)
    assert not local.origin_ok("http://localhost:9999", None)
    assert not local.origin_ok("null", "http://127.0.0.1:8470/p/x")  # Origin wins over Referer
    assert local.origin_ok(None, "http://127.0.0.1:8470/p/x") and not local.origin_ok(None, None)
    proxied = Origins.for_server("127.0.0.1", 8470, "https://sup.example.com")
    assert proxied.host_ok("sup.example.com") and proxied.origin_ok("https://sup.example.com", None)
    assert not proxied.origin_ok("http://sup.example.com", None)


def test_serve_binds_beyond_loopback_only_behind_tls() -> None:
    check_bind("127.0.0.1", None, False)
    check_bind("0.0.0.0", "https://sup.example.com", False)
    check_bind("0.0.0.0", None, True)
    with pytest.raises(NotLoopback):
        check_bind("0.0.0.0", None, False)
    with pytest.raises(PublicUrlInvalid):
        check_bind("127.0.0.1", "http://sup.example.com", False)


def test_shown_escapes_hidden_characters_then_markup() -> None:
    assert shown('a\u202e<b>"\x1b') == "a\\u202e&lt;b&gt;&quot;\\u001b"
