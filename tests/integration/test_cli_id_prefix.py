"""Ids typed by a person: a unique prefix names one row, an ambiguous one lists the candidates."""

from __future__ import annotations

import json
import types
import uuid
from collections.abc import Iterator

import pytest
from support.cli import assert_one_line_error, run_cli

from supervisor.ledger.models import ProposalStatus
from supervisor.store.provider import SQLModelProvider

IDS = ["abcd1111" + "0" * 24, "abcd2222" + "0" * 24, "ef012345" + "0" * 24]


@pytest.fixture
def three(ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Three pending proposals with known ids (two share the prefix ``abcd``)."""
    ids = iter(IDS)
    fake = types.SimpleNamespace(uuid4=lambda: uuid.UUID(next(ids)))
    monkeypatch.setattr("supervisor.ledger.service.uuid", fake)
    with SQLModelProvider(ledger_url) as provider:
        for number, tool in enumerate(["refund", "refund", "delete_file"]):
            provider.ledger.propose(tool, "h", {"n": number})
    monkeypatch.undo()
    yield ledger_url


def test_a_unique_prefix_approves_that_proposal_and_prints_its_full_id(three: str) -> None:
    done = run_cli("proposals", "approve", "abcd2", "--db", three, "--approver", "ops")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"approved {IDS[1]} by ops")
    shown = run_cli("proposals", "show", "ef01", "--db", three)
    assert shown.returncode == 0 and f"proposal    {IDS[2]}" in shown.stdout
    with SQLModelProvider(three) as provider:
        statuses = [provider.ledger.get(found).status for found in IDS]
    assert statuses == [ProposalStatus.PENDING, ProposalStatus.APPROVED, ProposalStatus.PENDING]


def test_an_ambiguous_prefix_lists_the_candidates_and_decides_nothing(three: str) -> None:
    done = run_cli("proposals", "reject", "abcd", "--reason", "no", "--db", three)
    assert_one_line_error(done, "ambiguous_id")
    assert f"{IDS[0]} (refund); {IDS[1]} (refund)" in done.stderr
    assert IDS[2] not in done.stderr
    for too_short in ("abc", "e"):  # even where it would be unique
        assert_one_line_error(
            run_cli("proposals", "approve", too_short, "--db", three), "id_prefix_too_short"
        )
    assert_one_line_error(run_cli("proposals", "show", "ffff", "--db", three), "proposal_not_found")
    with SQLModelProvider(three) as provider:
        assert all(provider.ledger.get(found).status is ProposalStatus.PENDING for found in IDS)


def test_a_grant_is_made_and_revoked_by_prefixes(three: str) -> None:
    added = run_cli("grants", "add", "ef01", "--db", three, "--approver", "ops", "--json")
    assert added.returncode == 0, added.stderr
    grant_id = json.loads(added.stdout)["grant_id"]
    revoked = run_cli("grants", "revoke", grant_id[:8], "--reason", "done", "--db", three)
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.startswith(f"revoked {grant_id}")
