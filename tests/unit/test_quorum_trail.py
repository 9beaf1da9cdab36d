"""The audit trail refuses an approval of a quorum proposal that its votes do not explain:
fewer distinct OS users than the rule asked for (the same user on two hosts is one)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from supervisor.ledger.models import AuditRecord, ProposalStatus
from supervisor.ledger.trail import quorum_person, replay

AT = datetime(2030, 1, 1, tzinfo=UTC)


def _record(seq: int, action: str, **payload: Any) -> AuditRecord:
    return AuditRecord(
        seq=seq, at=AT + timedelta(seconds=seq), actor="x", action=action, subject="p1",
        payload={"args_hash": "h", **payload}, prev_hash="0" * 64, hash=f"{seq:064d}",
    )  # fmt: skip


def _propose(required: int) -> AuditRecord:
    return _record(1, "propose", expires_at=(AT + timedelta(hours=1)).isoformat(),
                   approvals_required=required)  # fmt: skip


@pytest.mark.parametrize(
    ("votes", "approver", "explained"),
    [
        ([], "alice@h1", False),
        (["alice@h1"], "bob@h2", True),
        (["alice@h1"], "alice@h2", False),  # the same user on another host
        (["alice@h1"], "ALICE@h1", False),
        (["alice@h1", "bob@h1"], "carol@h1", True),
    ],
)
def test_an_approve_needs_the_quorum_of_distinct_users(
    votes: list[str], approver: str, explained: bool
) -> None:
    required = 2 if len(votes) < 2 else 3
    records = [_propose(required)]
    records += [_record(2 + n, "approve_vote", identity=who) for n, who in enumerate(votes)]
    records.append(_record(10, "approve", identity=approver))
    trail = replay("p1", records)
    assert (trail.problem is None) is explained, trail.problem
    assert (trail.status is ProposalStatus.APPROVED) is explained


def test_a_repeated_vote_is_refused_and_a_plain_proposal_takes_no_votes() -> None:
    trail = replay("p1", [_propose(3), _record(2, "approve_vote", identity="a@h1"),
                          _record(3, "approve_vote", identity="a@h2")])  # fmt: skip
    assert trail.problem is not None and "same OS user" in trail.problem
    plain = replay("p1", [_propose(1), _record(2, "approve_vote", identity="a@h1")])
    assert plain.problem is not None and "not awaiting one" in plain.problem
    assert quorum_person("Alice@Host") == "alice" and quorum_person("bob") == "bob"
