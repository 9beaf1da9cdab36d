"""Writing a ledger the way an attacker can: plain SQL on the same database, no ledger code.

Any process that can write the shared SQLite file (or holds the PostgreSQL role) can do this.
Tests use these helpers to tamper with rows and then check that the claim refuses
(``audit_mismatch``, audited, nothing runs) and that ``verify`` names what changed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from supervisor.ledger import AuditMismatch
from supervisor.ledger.service import ApprovalLedger
from supervisor.ledger.verify import LedgerReport


def sql(attacker: Engine, statement: str, **params: Any) -> None:
    """Run one statement in its own committed transaction."""
    with attacker.begin() as connection:
        connection.execute(sa.text(statement), params)


def timestamp(attacker: Engine, moment: datetime) -> str:
    """``moment`` in the text form the column stores (SQLite: naive UTC; PostgreSQL: offset)."""
    utc = moment.astimezone(UTC)
    if attacker.dialect.name == "sqlite":
        return utc.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
    return utc.isoformat()


def refused_claim(ledger: ApprovalLedger, proposal_id: str, expected: str) -> AuditMismatch:
    """Claim, expect ``audit_mismatch``, and check it was audited and nothing was claimed."""
    before = ledger.get(proposal_id).status
    with pytest.raises(AuditMismatch) as caught:
        ledger.claim(proposal_id, expected, "worker")
    assert caught.value.code == "audit_mismatch"
    last = ledger.events_since(ledger.head() - 1)[-1]
    assert (last.action, last.subject) == ("claim_refused", proposal_id)
    assert last.payload["reason"] == "audit_mismatch"
    assert ledger.execution(proposal_id) is None
    assert ledger.get(proposal_id).status is before
    return caught.value


def checks(report: LedgerReport, subject: str) -> set[str]:
    """The checks ``report`` failed for one proposal id (or ``policy vN``)."""
    return {f.check for f in report.mismatches if f.proposal_id == subject}
