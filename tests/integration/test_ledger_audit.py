"""The audit hash chain holds, and tampering with the database is detected."""

from __future__ import annotations

import itertools

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from supervisor.canonical import canonical_json
from supervisor.ledger import ArgumentsMismatch, ProposalStatus
from supervisor.ledger.audit import GENESIS_HASH, chain_hash
from supervisor.ledger.service import ApprovalLedger


def _lifecycle(ledger: ApprovalLedger) -> None:
    for index in range(3):
        proposal = ledger.propose("tool", "schema", {"i": index}, owner="agent")
        ledger.approve(proposal.proposal_id, "alice", "fine")
        ledger.claim(proposal.proposal_id, proposal.args_hash, "worker")
        ledger.complete(proposal.proposal_id, "success")


def test_chain_verifies_and_links(ledger: ApprovalLedger) -> None:
    assert ledger.verify().ok and ledger.verify().checked == 0
    _lifecycle(ledger)
    records = ledger.events_since(0)
    assert [r.seq for r in records] == list(range(1, 13))
    assert records[0].prev_hash == GENESIS_HASH
    for previous, record in itertools.pairwise(records):
        assert record.prev_hash == previous.hash
    first = records[0]
    assert first.hash == chain_hash(
        seq=1, at=first.at, actor=first.actor, action=first.action, subject=first.subject,
        payload=first.payload, prev_hash=GENESIS_HASH,
    )  # fmt: skip
    report = ledger.verify()
    assert (report.ok, report.checked, report.first_broken_seq) == (True, 12, None)


@pytest.mark.parametrize(
    ("column", "value"),
    [("actor", "'mallory'"), ("payload_json", "'{}'"), ("action", "'reject'")],
)
def test_editing_an_audit_row_names_its_seq(
    ledger: ApprovalLedger, engine: Engine, column: str, value: str
) -> None:
    _lifecycle(ledger)
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE audit SET {column} = {value} WHERE seq = 6"))
    report = ledger.verify()
    assert (report.ok, report.first_broken_seq, report.checked) == (False, 6, 5)


def test_rehashing_an_edited_row_still_breaks_the_next_link(
    ledger: ApprovalLedger, engine: Engine
) -> None:
    _lifecycle(ledger)
    seven = ledger.events_since(6, limit=1)[0]
    forged_payload = {**seven.payload, "outcome_status": "error"}
    forged_hash = chain_hash(
        seq=7, at=seven.at, actor=seven.actor, action=seven.action, subject=seven.subject,
        payload=forged_payload, prev_hash=seven.prev_hash,
    )  # fmt: skip
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE audit SET payload_json = :p, hash = :h WHERE seq = 7"),
            {"p": canonical_json(forged_payload), "h": forged_hash},
        )
    assert ledger.verify().first_broken_seq == 8


def test_deleting_an_audit_row_names_the_gap(ledger: ApprovalLedger, engine: Engine) -> None:
    _lifecycle(ledger)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM audit WHERE seq = 4"))
    report = ledger.verify()
    assert (report.ok, report.first_broken_seq) == (False, 4)
    assert "missing" in (report.reason or "")


def test_tampered_arguments_refuse_the_claim(ledger: ApprovalLedger, engine: Engine) -> None:
    proposal = ledger.propose("transfer", "schema", {"amount": 10, "to": "alice"})
    ledger.approve(proposal.proposal_id, "bob")
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE proposal SET arguments_json = :a WHERE id = :id"),
            {"a": canonical_json({"amount": 10000, "to": "mallory"}), "id": proposal.proposal_id},
        )
    with pytest.raises(ArgumentsMismatch) as caught:
        ledger.claim(proposal.proposal_id, proposal.args_hash)
    assert caught.value.code == "arguments_mismatch"
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.APPROVED
    refused = ledger.events_since(0)[-1]
    assert (refused.action, refused.subject) == ("claim_refused", proposal.proposal_id)
    # The chain itself is intact; the replay names the row whose arguments it does not explain.
    report = ledger.verify()
    assert report.chain_ok and not report.ok
    assert [(f.proposal_id, f.check) for f in report.mismatches] == [
        (proposal.proposal_id, "arguments")
    ]


def test_tampered_hash_refuses_the_claim(ledger: ApprovalLedger, engine: Engine) -> None:
    proposal = ledger.propose("transfer", "schema", {"amount": 10, "to": "alice"})
    ledger.approve(proposal.proposal_id, "bob")
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE proposal SET args_hash = :h WHERE id = :id"),
            {"h": "f" * 64, "id": proposal.proposal_id},
        )
    # Neither the original hash nor the tampered one lets it run.
    for expected in (proposal.args_hash, "f" * 64):
        with pytest.raises(ArgumentsMismatch):
            ledger.claim(proposal.proposal_id, expected)
    assert ledger.get(proposal.proposal_id).status is ProposalStatus.APPROVED


def test_tampered_target_refuses_the_claim(ledger: ApprovalLedger, engine: Engine) -> None:
    proposal = ledger.propose("click", "s", {"x": 1}, execution_target={"url": "https://a.test"})
    ledger.approve(proposal.proposal_id, "bob")
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE proposal SET target_json = :t WHERE id = :id"),
            {"t": canonical_json({"url": "https://evil.test"}), "id": proposal.proposal_id},
        )
    with pytest.raises(ArgumentsMismatch):
        ledger.claim(proposal.proposal_id, proposal.args_hash)
