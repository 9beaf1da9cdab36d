"""Grants: time-boxed, use-capped permissions an operator made from one pending call.

A grant allows later calls of the same tool (same schema hash, same execution target, the
same agent unless widened) whose arguments match its patterns
(:mod:`supervisor.rules.grants`), until it expires, runs out of uses or is revoked. It only
turns an ``ask`` into an ``allow``: a ``deny`` rule still denies. Every call it allows is a
ledger decision naming it (``decided_by_rule = "grant:<id>"``).

A row is a cache of its ``grant_create`` audit record: the row's :meth:`Grant.document_hash`
must be the one the record holds, so a row inserted or widened with SQL allows nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from supervisor.canonical import canonical_json, sha256_hex
from supervisor.ledger.models import Proposal
from supervisor.rules.grants import grant_matches

GRANT_SUBJECT_PREFIX = "grant:"
"""Audit subjects of grants are ``grant:<id>``."""
GRANT_CREATE = "grant_create"
GRANT_REVOKE = "grant_revoke"
GRANT_USE = "grant_use"
DEFAULT_GRANT_SECONDS = 15 * 60.0
"""A grant's lifetime unless the operator picks another."""
DEFAULT_GRANT_USES = 20
MAX_GRANT_SECONDS = 7 * 24 * 3600.0


class Grant(BaseModel):
    """One grant as stored.

    Attributes:
        grant_id: Its id.
        tool_name, schema_hash, target_hash: The tool contract and execution target it is for;
            a call with another schema or target is never allowed by it.
        owner: The agent it is for (``""``: any agent).
        arguments: Argument name -> one checked pattern (:func:`check_patterns`).
        created_by: The OS identity (``user@host``) of the process that made it.
        approver_id: The label of the operator who made it.
        created_at, expires_at: Its lifetime.
        max_uses, uses: The use cap and the calls allowed so far.
        revoked_at, revoked_by, revoke_reason: Set once revoked (or killed by a schema change).
        source_proposal_id: The pending call it was made from.
        reason: Why, as the operator gave it.
        document_hash: SHA-256 of :meth:`document` (what its audit record holds).
    """

    model_config = ConfigDict(frozen=True)

    grant_id: str
    tool_name: str
    schema_hash: str
    target_hash: str
    owner: str = ""
    arguments: dict[str, Any]
    created_by: str
    approver_id: str
    created_at: datetime
    expires_at: datetime
    max_uses: int
    uses: int = 0
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    revoke_reason: str | None = None
    source_proposal_id: str | None = None
    reason: str | None = None
    document_hash: str = ""

    def document(self) -> dict[str, Any]:
        """What the grant allows and who made it: the part its audit record binds."""
        return {
            "grant_id": self.grant_id, "tool": self.tool_name, "schema_hash": self.schema_hash,
            "target_hash": self.target_hash, "owner": self.owner, "arguments": self.arguments,
            "created_by": self.created_by, "approver_id": self.approver_id,
            "created_at": self.created_at.isoformat(), "expires_at": self.expires_at.isoformat(),
            "max_uses": self.max_uses, "source_proposal_id": self.source_proposal_id,
        }  # fmt: skip

    @property
    def scope(self) -> GrantScope:
        """What this grant covers."""
        return GrantScope(self.tool_name, self.schema_hash, self.target_hash, self.owner,
                          self.arguments)  # fmt: skip

    def computed_hash(self) -> str:
        return sha256_hex(canonical_json(self.document()).encode())

    def state(self, now: datetime) -> str:
        """``active``, ``expired``, ``used up`` or ``revoked``."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at <= now:
            return "expired"
        if self.uses >= self.max_uses:
            return "used up"
        return "active"


@dataclass(frozen=True)
class GrantScope:
    """What a grant (made, or about to be made) covers: one test for the ledger deciding a
    call, the TUI listing similar pending calls and batch approval by a grant.

    Attributes:
        tool_name, schema_hash, target_hash: The tool contract and execution target.
        owner: The agent (``""``: any agent).
        arguments: Argument name -> one checked pattern.
    """

    tool_name: str
    schema_hash: str
    target_hash: str
    owner: str
    arguments: Mapping[str, Any]

    def covers(
        self, *, tool: str, schema_hash: str, target: dict[str, Any], agent: str,
        arguments: Mapping[str, Any],
    ) -> bool:  # fmt: skip
        """The call is of this tool, schema, target and agent, with matching arguments."""
        return (
            tool == self.tool_name
            and schema_hash == self.schema_hash
            and self.owner in ("", agent)
            and target_hash(target) == self.target_hash
            and grant_matches(self.arguments, arguments)
        )

    def covers_proposal(self, proposal: Proposal) -> bool:
        """:meth:`covers` for a recorded call."""
        return self.covers(
            tool=proposal.tool_name, schema_hash=proposal.tool_schema_hash,
            target=proposal.execution_target, agent=proposal.owner,
            arguments=proposal.arguments,
        )  # fmt: skip


def target_hash(execution_target: dict[str, Any]) -> str:
    """The hash a grant binds an execution target by (its canonical JSON)."""
    return sha256_hex(canonical_json(execution_target).encode())
