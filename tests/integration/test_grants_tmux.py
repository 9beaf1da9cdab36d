"""In a real terminal: ``g`` on a pending call, the path widened to its directory with the
keyboard, Ctrl+S; the grant then decides a similar call recorded by another process, ``G``
shows it with its use, and ``r`` + ``y`` revokes it.

tmux runs on its own socket with a fixed size; ``capture-pane`` reads the screen.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.tmux import Tmux, tmux_server

from supervisor.ledger.models import ProposalStatus
from supervisor.store.provider import SQLModelProvider

pytestmark = pytest.mark.slow
SCHEMA = "5" * 64


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    with tmux_server("supervisor-grants", session="tui", shown_while_open="Agent Supervisor") as s:
        yield s


def _write(url: str, path: str) -> str:
    with SQLModelProvider(url) as provider:
        proposal = provider.ledger.propose(
            "write_file", SCHEMA, {"path": path, "mode": "w"}, owner="ops-agent",
            thread_id="t-1", ttl_seconds=3600,
        )  # fmt: skip
        return proposal.proposal_id


def test_a_grant_made_with_the_keyboard_decides_the_next_call_and_is_revoked(
    tmux: Tmux, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    source = _write(url, "/srv/app/logs/a.txt")
    tmux.start_supervisor(f"--db {url}", width=160)
    tmux.wait_for(lambda s: "all arguments shown" in s, 60, "the proposal shown in full")
    time.sleep(1.0)  # a decision key counts once the call was on screen for the settle time
    tmux.keys("g")
    tmux.wait_for(lambda s: "allow similar calls" in s, 10, "the grant dialog")
    tmux.keys("Tab")  # from the first argument's kind (mode) to the second's (path)
    tmux.keys("Enter")
    tmux.wait_for(lambda s: "path prefix" in s, 10, "the kinds of the path argument")
    tmux.keys("Down")
    tmux.keys("Enter")
    tmux.wait_for(lambda s: "/srv/app/logs/" in s.replace('"/srv/app/logs/a', ""), 10,
                  "the prefilled directory")  # fmt: skip
    tmux.keys("C-s")
    screen = tmux.wait_for(lambda s: "Approved and granted" in s, 15, "the grant toast")
    with SQLModelProvider(url) as provider:
        assert provider.ledger.get(source).status is ProposalStatus.APPROVED
        (grant,) = provider.ledger.grants()
        assert grant.arguments["path"] == {"prefix": "/srv/app/logs/"}
        similar = provider.ledger.propose(
            "write_file", SCHEMA, {"path": "/srv/app/logs/b.txt", "mode": "w"},
            owner="ops-agent", ttl_seconds=3600,
        )  # fmt: skip
        assert similar.decided_by_rule == f"grant:{grant.grant_id}"
    tmux.keys("G")
    screen = tmux.wait_for(
        lambda s: grant.grant_id[:12] in s and "1/20" in s, 15, "the grant with its use"
    )
    assert 'path=prefix:"/srv/app/logs/"' in screen and "ops-agent" in screen
    tmux.keys("r")
    tmux.wait_for(lambda s: "Revoke grant" in s, 10, "the revoke confirmation")
    tmux.keys("y")
    tmux.wait_for(lambda s: "Grant revoked" in s or "revoked;" in s, 15, "the revoke toast")
    with SQLModelProvider(url) as provider:
        assert provider.ledger.grant(grant.grant_id).revoked_at is not None
        after = provider.ledger.propose(
            "write_file", SCHEMA, {"path": "/srv/app/logs/c.txt", "mode": "w"},
            owner="ops-agent", ttl_seconds=3600,
        )  # fmt: skip
        assert after.status is ProposalStatus.PENDING
    tmux.keys("Escape")
