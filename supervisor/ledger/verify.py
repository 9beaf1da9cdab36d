"""Replaying the audit chain against the ledger's rows, and anchoring its head.

:func:`verify_ledger` checks the whole chain, folds it into one :class:`Trail` per proposal
(``supervisor.ledger.trail``), reports every proposal and execution row its trail does not
explain, and optionally checks that an externally kept anchor (a seq and its hash) is still in
the chain. The report is bounded (a count and the first findings) and JSON-able.

Records whose subject is not a proposal do not touch any trail; a ``purge`` record removes the
trails of the proposals it names, and ``policy_apply`` records are replayed against the
``policy_version`` rows (``supervisor.ledger.policy_audit``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from supervisor.canonical import args_hash as compute_args_hash
from supervisor.ledger.audit import GENESIS_HASH, verify_chain
from supervisor.ledger.errors import InvalidAnchor
from supervisor.ledger.models import AuditRecord, AuditReport, Execution, Proposal
from supervisor.ledger.policy_audit import PolicyReplay, PolicyRow
from supervisor.ledger.trail import (
    PROPOSAL_ACTIONS,
    BoundField,
    ExecutedField,
    Trail,
    execution_fields,
    field_disagreements,
)

DEFAULT_MAX_FINDINGS = 20

Check = Literal[
    "audit", "chain", "row", "status", "args_hash", "arguments", "expires_at", "approver",
    "superseded_by", "claims", "execution", "policy",
    BoundField,  # the fields the propose record binds
    ExecutedField,  # the fields the claim / complete / fail records bind
]  # fmt: skip


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class RowFinding(_Frozen):
    """One thing about a proposal row (or a policy row) that its audit records do not explain."""

    proposal_id: str
    """The proposal, or ``policy vN`` for a ``policy`` finding about policy version N."""
    check: Check
    chain: str | None = None
    """What the audit chain says (``None``: it says nothing)."""
    row: str | None = None
    """What the row says."""
    detail: str


class Anchor(_Frozen):
    """A chain head recorded outside the ledger: its hash and, if known, its seq."""

    hash: str
    seq: int | None = None

    @classmethod
    def parse(cls, text: str) -> Anchor:
        """``HASH`` or ``SEQ:HASH`` (as printed by ``supervisor audit head``).

        Raises:
            InvalidAnchor: Neither form, or the hash is not 64 hex digits.
        """
        seq_text, _, digest = text.strip().rpartition(":")
        digest = digest.lower()
        if len(digest) != 64 or any(char not in "0123456789abcdef" for char in digest):
            raise InvalidAnchor(text)
        if not seq_text:
            return cls(hash=digest)
        if not seq_text.isdigit() or not seq_text.isascii():
            raise InvalidAnchor(text)
        return cls(hash=digest, seq=int(seq_text))


class AnchorCheck(_Frozen):
    """Whether the chain still holds an anchor."""

    ok: bool
    hash: str
    seq: int | None
    found_seq: int | None = None
    records_after: int | None = None
    """Records appended after the anchor: the anchor does not cover them."""
    reason: str | None = None


class ChainHead(_Frozen):
    """The newest audit record's seq and hash (seq 0 and 64 zeros for an empty chain)."""

    seq: int
    hash: str

    @property
    def anchor(self) -> str:
        """The ``SEQ:HASH`` form ``verify --anchor`` takes."""
        return f"{self.seq}:{self.hash}"


class LedgerReport(AuditReport):
    """The chain check (the :class:`AuditReport` fields) plus the replay of every row.

    ``ok`` is true only if the chain is intact, every row is explained by it and the anchor (if
    given) is still in it; ``checked``, ``first_broken_seq`` and ``reason`` describe the chain.
    """

    chain_ok: bool = True
    head: ChainHead = ChainHead(seq=0, hash=GENESIS_HASH)
    proposals_checked: int = 0
    policy_versions_checked: int = 0
    mismatch_count: int = 0
    mismatches: tuple[RowFinding, ...] = ()
    """The first ``max_findings`` findings, in proposal-id order (then chain-only proposals)."""
    anchor: AnchorCheck | None = None


def _show(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _found(
    proposal_id: str, check: Check, chain: str | None, row: str | None, detail: str
) -> RowFinding:
    return RowFinding(proposal_id=proposal_id, check=check, chain=chain, row=row, detail=detail)


def row_findings(
    trail: Trail | None, proposal: Proposal, execution: Execution | None
) -> Iterator[RowFinding]:
    """Everything about one proposal row (and its execution) that ``trail`` does not explain."""
    pid = proposal.proposal_id
    recomputed = compute_args_hash(
        proposal.tool_name, proposal.tool_schema_hash, proposal.arguments,
        proposal.execution_target,
    )  # fmt: skip
    if recomputed != proposal.args_hash:
        yield _found(
            pid, "arguments", recomputed, proposal.args_hash,
            "the stored tool, arguments and target do not hash to the stored args hash",
        )  # fmt: skip
    if trail is None or trail.status is None:
        if trail is not None and trail.purged:
            yield _found(pid, "row", "purged", proposal.status.value, "a purged proposal is back")
        else:
            yield _found(pid, "audit", None, proposal.status.value, "no audit record proposes it")
        return
    if trail.problem is not None:
        yield _found(pid, "chain", None, None, trail.problem)
    expected: list[tuple[Check, str | None, str | None]] = [
        ("status", trail.status.value, proposal.status.value),
        ("args_hash", trail.args_hash, proposal.args_hash),
        ("expires_at", _show(trail.expires_at), _show(proposal.expires_at)),
        ("approver", trail.approver_id, proposal.approver_id),
        ("superseded_by", trail.superseded_by_id, proposal.superseded_by_id),
    ]
    for check, chain_says, row_says in [*expected, *field_disagreements(trail, proposal)]:
        if chain_says != row_says:
            yield _found(
                pid, check, chain_says, row_says, f"the row's {check} is not the audited one"
            )
    if trail.claims > 1:
        yield _found(pid, "claims", str(trail.claims), None, "the chain records several claims")
    yield from _execution_findings(pid, trail, execution)


def _execution_findings(
    pid: str, trail: Trail, execution: Execution | None
) -> Iterator[RowFinding]:
    if execution is None:
        if trail.claims:
            yield _found(pid, "execution", "claimed", None, "the execution row of a claim is gone")
        return
    if not trail.claims:
        yield _found(
            pid, "execution", None, execution.state, "an execution row without an audited claim"
        )
        return
    status = trail.status
    if status is not None and status.consumed and execution.state != status.value:
        yield _found(
            pid, "execution", status.value, execution.state,
            "the execution state is not the audited one",
        )  # fmt: skip
    if execution.args_hash != trail.claimed_args_hash:
        yield _found(
            pid, "execution", trail.claimed_args_hash, execution.args_hash,
            "the execution's args hash is not the claimed one",
        )  # fmt: skip
    stored = execution_fields(execution)
    for check, audited in trail.executed.items():
        if audited != stored[check]:
            yield _found(
                pid,
                check,
                audited,
                stored[check],
                f"the execution's {check} is not the audited one",
            )


class _Findings:
    """Counts every finding and keeps the first ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self.count = 0
        self.kept: list[RowFinding] = []

    def extend(self, findings: Iterable[RowFinding]) -> None:
        for item in findings:
            self.count += 1
            if len(self.kept) < self.limit:
                self.kept.append(item)


class _ChainReplay:
    """Folds the whole chain (ascending seq) into one trail per proposal, watching for an
    anchor and the head on the way."""

    def __init__(self, anchor: Anchor | None) -> None:
        self.trails: dict[str, Trail] = {}
        self.policy = PolicyReplay()
        self.anchor = anchor
        genesis = anchor is not None and anchor.hash == GENESIS_HASH and anchor.seq in (None, 0)
        self.anchor_seq: int | None = 0 if genesis else None
        self.anchor_hash_at_seq: str | None = None
        self.head = ChainHead(seq=0, hash=GENESIS_HASH)

    def feed(self, records: Iterable[AuditRecord]) -> Iterator[AuditRecord]:
        for record in records:
            self.add(record)
            yield record

    def add(self, record: AuditRecord) -> None:
        self.head = ChainHead(seq=record.seq, hash=record.hash)
        anchor = self.anchor
        if anchor is not None:
            if record.hash == anchor.hash and anchor.seq in (None, record.seq):
                self.anchor_seq = record.seq
            elif record.seq == anchor.seq:
                self.anchor_hash_at_seq = record.hash
        self.policy.add(record)
        if record.action == "purge":
            ids = record.payload.get("proposal_ids")
            for proposal_id in ids if isinstance(ids, list) else ():
                if isinstance(proposal_id, str):
                    self.trails[proposal_id] = Trail(proposal_id, purged=True)
            return
        if record.action not in PROPOSAL_ACTIONS:
            return
        trail = self.trails.get(record.subject)
        if trail is None:
            trail = self.trails[record.subject] = Trail(record.subject)
        trail.apply(record)

    def anchor_check(self, chain: AuditReport) -> AnchorCheck | None:
        anchor = self.anchor
        if anchor is None:
            return None
        found = self.anchor_seq
        if found is None:
            where = f" at seq {anchor.seq}" if anchor.seq is not None else ""
            reason = f"the chain no longer holds the anchored hash{where}"
            if self.anchor_hash_at_seq is not None:
                reason += f" (seq {anchor.seq} now hashes to {self.anchor_hash_at_seq[:12]})"
            elif anchor.seq is not None and anchor.seq > self.head.seq:
                reason += f" (the chain ends at seq {self.head.seq})"
            return AnchorCheck(ok=False, hash=anchor.hash, seq=anchor.seq, reason=reason)
        broken = chain.first_broken_seq
        intact = broken is None or broken > found
        return AnchorCheck(
            ok=intact, hash=anchor.hash, seq=anchor.seq, found_seq=found,
            records_after=self.head.seq - found,
            reason=None if intact else f"the chain breaks at seq {broken}, before the anchor",
        )  # fmt: skip


def verify_ledger(
    audit: Iterable[AuditRecord],
    rows: Iterable[tuple[Proposal, Execution | None]],
    *,
    policy_rows: Iterable[PolicyRow] = (),
    anchor: Anchor | None = None,
    max_findings: int = DEFAULT_MAX_FINDINGS,
) -> LedgerReport:
    """Check the chain, replay it against every row and look for ``anchor``.

    Args:
        audit: Every audit record, ascending seq from 1 (read in the same snapshot as ``rows``).
        rows: Every proposal with its execution, in any order.
        policy_rows: Every ``policy_version`` row (same snapshot), in any order.
        anchor: A head recorded outside the ledger; the chain must still hold it.
        max_findings: How many findings the report lists (all are counted).

    Returns:
        The report; ``ok`` only if the chain, every row and the anchor check out.
    """
    replayed = _ChainReplay(anchor)
    stream = replayed.feed(audit)
    chain = verify_chain(stream)
    for _ in stream:  # the chain check stops at the first break; the replay reads on
        pass
    findings = _Findings(max_findings)
    checked = 0
    for proposal, execution in rows:
        checked += 1
        findings.extend(row_findings(replayed.trails.pop(proposal.proposal_id, None), proposal,
                                     execution))  # fmt: skip
    for trail in replayed.trails.values():
        if trail.problem is None and (trail.purged or trail.status is None):
            continue  # purged as recorded, or only records that change nothing
        findings.extend([_found(
            trail.proposal_id, "row", trail.status.value if trail.status else None, None,
            trail.problem or "the audit chain records this proposal but its row is gone",
        )])  # fmt: skip
    for item in replayed.policy.findings(policy_rows):
        subject = f"policy v{item.version}" if item.version is not None else "policy"
        findings.extend([_found(subject, "policy", item.chain, item.row,
                                f"{item.field}: {item.detail}")])  # fmt: skip
    anchor_check = replayed.anchor_check(chain)
    ok = chain.ok and findings.count == 0 and (anchor_check is None or anchor_check.ok)
    reason = chain.reason
    if reason is None and findings.count:
        reason = f"{findings.count} finding(s) the audit chain does not explain"
        if replayed.head.seq == 0:
            reason = f"the ledger holds {checked} proposal(s) but no audit records"
    if reason is None and anchor_check is not None and not anchor_check.ok:
        reason = anchor_check.reason
    return LedgerReport(
        ok=ok, checked=chain.checked, first_broken_seq=chain.first_broken_seq, reason=reason,
        chain_ok=chain.ok, head=replayed.head, proposals_checked=checked,
        policy_versions_checked=replayed.policy.rows_checked, mismatch_count=findings.count,
        mismatches=tuple(findings.kept), anchor=anchor_check,
    )  # fmt: skip
