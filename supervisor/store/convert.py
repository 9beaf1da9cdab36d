"""Conversions between table rows and the domain models: the only place that knows both.

Readers take an ORM row or a Core row of the table (both have the columns as attributes);
writers give the column values (a dict for a Core statement or ``sqlmodel_update``) or a row.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from types import SimpleNamespace
from typing import Any, cast

import sqlalchemy as sa
from sqlmodel import SQLModel

from supervisor.canonical import canonical_json
from supervisor.ledger.models import (
    AgentRecord,
    ApproverContext,
    AuditRecord,
    Blob,
    CacheEntry,
    Checkpoint,
    Execution,
    ExecutorIdentity,
    ProcessRecord,
    ProcessStep,
    Proposal,
    ProposalStatus,
    QuorumVote,
    ToolRecord,
    TraceEvent,
)
from supervisor.ledger.policy import PolicyInForce, PolicyVersion, StoredPolicy
from supervisor.ledger.policy_audit import PolicyRow
from supervisor.store.cache_table import SemanticCacheRow
from supervisor.store.tables import (
    AgentRow,
    BlobRow,
    CheckpointRow,
    ExecutionRow,
    PolicyVersionRow,
    ProcessRow,
    ProposalRow,
    ToolRegistryRow,
    TraceEventRow,
)

_EXECUTION = SQLModel.metadata.tables[ExecutionRow.__tablename__]
EXECUTION_PREFIX = "x_"
"""Label prefix of the execution columns in a proposal row joined to its execution."""
_COLUMN_OF = {"proposal_id": "id", "user": "user_id"}
_JOINED_COLUMNS = tuple((column.name, EXECUTION_PREFIX + column.name) for column in _EXECUTION.c)
_JOINED_ID = EXECUTION_PREFIX + "id"


def loads(text: str | None, default: Any = None) -> Any:
    """Parse stored JSON text; empty or ``None`` gives ``default``."""
    if not text:
        return default
    if text == "{}":  # the common empty values, without the parser
        return {}
    if text == "[]":
        return []
    return json.loads(text)


def proposal_from_row(row: ProposalRow | Any) -> Proposal:
    """A proposal from its ORM row or a Core row of the proposal table."""
    context = loads(row.approver_context_json)
    return Proposal(
        proposal_id=row.id,
        tool_name=row.tool_name,
        tool_schema_hash=row.tool_schema_hash,
        arguments=loads(row.arguments_json, {}),
        args_hash=row.args_hash,
        execution_target=loads(row.target_json, {}),
        policy_reason=row.policy_reason,
        owner=row.owner,
        user=row.user_id,
        thread_id=row.thread_id,
        checkpoint_id=row.checkpoint_id,
        call_id=row.call_id,
        domains=tuple(loads(row.domains_json, [])),
        risk=row.risk,
        status=ProposalStatus(row.status),
        created_at=row.created_at,
        updated_at=row.updated_at,
        expires_at=row.expires_at,
        decided_at=row.decided_at,
        approver_id=row.approver_id,
        approver_context=ApproverContext.model_validate(context) if context else None,
        decision_reason=row.decision_reason,
        supersedes_id=row.supersedes_id,
        superseded_by_id=row.superseded_by_id,
        decided_by_rule=row.decided_by_rule,
        policy_version=row.policy_version,
        approvals_required=row.approvals_required,
        approvals=tuple(QuorumVote.model_validate(vote) for vote in loads(row.approvals_json, [])),
        grantable=row.grantable,
        runtime=row.runtime,
        turn_id=row.turn_id,
    )


def proposal_to_values(proposal: Proposal) -> dict[str, Any]:
    """The proposal table's column values for ``proposal`` (for a Core INSERT)."""
    context = proposal.approver_context
    return {
        "id": proposal.proposal_id,
        "tool_name": proposal.tool_name,
        "tool_schema_hash": proposal.tool_schema_hash,
        "arguments_json": canonical_json(proposal.arguments),
        "args_hash": proposal.args_hash,
        "target_json": canonical_json(proposal.execution_target),
        "policy_reason": proposal.policy_reason,
        "owner": proposal.owner,
        "user_id": proposal.user,
        "thread_id": proposal.thread_id,
        "checkpoint_id": proposal.checkpoint_id,
        "call_id": proposal.call_id,
        "domains_json": canonical_json(list(proposal.domains)),
        "risk": proposal.risk,
        "status": proposal.status.value,
        "created_at": proposal.created_at,
        "updated_at": proposal.updated_at,
        "expires_at": proposal.expires_at,
        "decided_at": proposal.decided_at,
        "approver_id": proposal.approver_id,
        "approver_context_json": canonical_json(context.model_dump()) if context else None,
        "decision_reason": proposal.decision_reason,
        "supersedes_id": proposal.supersedes_id,
        "superseded_by_id": proposal.superseded_by_id,
        "decided_by_rule": proposal.decided_by_rule,
        "policy_version": proposal.policy_version,
        "approvals_required": proposal.approvals_required,
        "approvals_json": votes_json(proposal.approvals),
        "grantable": proposal.grantable,
        "runtime": proposal.runtime,
        "turn_id": proposal.turn_id,
    }


def votes_json(votes: tuple[QuorumVote, ...]) -> str:
    """The stored form of a proposal's quorum votes."""
    return canonical_json([vote.model_dump(mode="json") for vote in votes])


def proposal_to_row(proposal: Proposal) -> ProposalRow:
    return ProposalRow(**proposal_to_values(proposal))


def execution_from_row(row: ExecutionRow | Any) -> Execution:
    """An execution from its ORM row or a Core row of the execution table."""
    return Execution(
        proposal_id=row.proposal_id,
        state=row.state,
        executor=ExecutorIdentity(
            executor_id=row.executor_id, pid=row.executor_pid, host=row.executor_host
        ),
        args_hash=row.args_hash,
        started_at=row.started_at,
        finished_at=row.finished_at,
        outcome_status=row.outcome_status,
        result_ref=row.result_ref,
        reason=row.reason,
    )


def proposal_columns(values: dict[str, Any]) -> dict[str, Any]:
    """Map domain field names and values of a proposal update to proposal columns."""
    columns: dict[str, Any] = {}
    for name, value in values.items():
        if name == "approver_context":
            context = cast(ApproverContext | None, value)
            columns["approver_context_json"] = (
                canonical_json(context.model_dump()) if context else None
            )
        elif name == "status":
            columns["status"] = ProposalStatus(value).value
        elif name == "approvals":
            columns["approvals_json"] = votes_json(value)
        else:
            columns[_COLUMN_OF.get(name, name)] = value
    return columns


def open_values(proposal: Proposal) -> dict[str, Any] | None:
    """The proposal_open row of ``proposal``, or ``None`` when it is terminal (not open).

    Whatever inserts proposal rows itself (a bulk load) inserts these beside them: the inbox,
    the expiry sweep and the other status queries start from that table.
    """
    if proposal.status.terminal:
        return None
    return {
        "proposal_id": proposal.proposal_id,
        "created_at": proposal.created_at,
        "expires_at": proposal.expires_at,
    }


def domain_values(proposal: Proposal) -> list[dict[str, Any]]:
    """The proposal_domain rows of ``proposal`` (one per domain)."""
    return [{"proposal_id": proposal.proposal_id, "domain": d} for d in proposal.domains]


def joined_execution(row: Any) -> Execution | None:
    """The execution columns (labelled :data:`EXECUTION_PREFIX`) of a proposal row joined to
    its execution; ``None`` when the proposal has none."""
    if getattr(row, _JOINED_ID) is None:
        return None
    return execution_from_row(
        SimpleNamespace(**{name: getattr(row, label) for name, label in _JOINED_COLUMNS})
    )


def execution_start_values(
    proposal_id: str, executor: ExecutorIdentity, args_hash: str, started_at: datetime
) -> dict[str, Any]:
    """The execution table's column values of a claim that starts executing."""
    return {
        "proposal_id": proposal_id,
        "state": "executing",
        "executor_id": executor.executor_id,
        "executor_pid": executor.pid,
        "executor_host": executor.host,
        "args_hash": args_hash,
        "started_at": started_at,
    }


def audit_from_row(row: Any) -> AuditRecord:
    """An audit record from its ORM or Core row, built without re-validation (the columns come
    typed from the table; ``at`` is tz-aware).

    A payload that is not a JSON object (written outside the ledger) reads as ``{}``: its hash
    then no longer matches, so ``verify`` names the record and the claim refuses, instead of
    every reader of the feed failing on it.
    """
    try:
        payload = json.loads(row.payload_json) if row.payload_json else {}
    except ValueError:
        payload = {}
    return AuditRecord.model_construct(
        seq=row.seq, at=row.at, actor=row.actor, action=row.action, subject=row.subject,
        payload=payload if isinstance(payload, dict) else {}, prev_hash=row.prev_hash,
        hash=row.hash,
    )  # fmt: skip


def audit_to_values(record: AuditRecord, payload_json: str) -> dict[str, Any]:
    """The audit table's column values of ``record`` (``payload_json``: its canonical payload,
    the text its hash covers)."""
    return {
        "seq": record.seq, "at": record.at, "actor": record.actor, "action": record.action,
        "subject": record.subject, "payload_json": payload_json, "prev_hash": record.prev_hash,
        "hash": record.hash,
    }  # fmt: skip


def checkpoint_from_row(row: CheckpointRow) -> Checkpoint:
    return Checkpoint(
        checkpoint_id=row.id,
        agent_id=row.agent_id,
        thread_id=row.thread_id,
        messages=loads(row.messages_json, []),
        pending_tool_calls=loads(row.pending_tool_calls_json, []),
        state=loads(row.state_json, {}),
        schema_version=row.schema_version,
        created_at=row.created_at,
    )


def checkpoint_to_row(checkpoint: Checkpoint) -> CheckpointRow:
    return CheckpointRow(**checkpoint_to_values(checkpoint))


def checkpoint_to_values(checkpoint: Checkpoint) -> dict[str, Any]:
    """The checkpoint table's column values (the sequence number is the database's)."""
    return {
        "id": checkpoint.checkpoint_id,
        "agent_id": checkpoint.agent_id,
        "thread_id": checkpoint.thread_id,
        "messages_json": canonical_json(checkpoint.messages),
        "pending_tool_calls_json": canonical_json(checkpoint.pending_tool_calls),
        "state_json": canonical_json(checkpoint.state),
        "schema_version": checkpoint.schema_version,
        "created_at": checkpoint.created_at,
    }


def trace_from_row(row: TraceEventRow) -> TraceEvent:
    return TraceEvent(
        event_id=row.id,
        at=row.at,
        agent_id=row.agent_id,
        thread_id=row.thread_id,
        run_id=row.run_id,
        kind=row.kind,
        tool=row.tool,
        outcome_status=row.outcome_status,
        reason_code=row.reason_code,
        payload=loads(row.payload_json, {}),
        blob_ref=row.blob_ref,
    )


def trace_to_values(event: TraceEvent) -> dict[str, Any]:
    """The trace_event table's column values (the id is the database's)."""
    return {
        "at": event.at,
        "agent_id": event.agent_id,
        "thread_id": event.thread_id,
        "run_id": event.run_id,
        "kind": event.kind,
        "tool": event.tool,
        "outcome_status": event.outcome_status,
        "reason_code": event.reason_code,
        "payload_json": canonical_json(event.payload),
        "blob_ref": event.blob_ref,
    }


def blob_from_row(row: BlobRow) -> Blob:
    """The blob as stored, content included and not verified (the ledger checks the digest)."""
    return Blob(
        sha256=row.sha256, size=row.size, media_type=row.media_type, preview=row.preview,
        content=row.content,
    )  # fmt: skip


def blob_to_values(blob: Blob, created_at: datetime) -> dict[str, Any]:
    """The blob table's column values of ``blob`` (its content stored in the row)."""
    return {
        "sha256": blob.sha256,
        "size": blob.size,
        "media_type": blob.media_type,
        "preview": blob.preview,
        "content": blob.content,
        "created_at": created_at,
    }


def tool_from_row(row: ToolRegistryRow) -> ToolRecord:
    return ToolRecord(
        handle=row.handle,
        agent_id=row.agent_id,
        name=row.name,
        import_ref=row.import_ref,
        description=row.description,
        json_schema=loads(row.tool_schema_json, {}),
        schema_hash=row.schema_hash,
        domains=tuple(loads(row.domains_json, [])),
        flags=loads(row.flags_json, {}),
    )


def tool_to_values(tool: ToolRecord, updated_at: datetime) -> dict[str, Any]:
    """The tool_registry table's column values of ``tool``."""
    return {
        "handle": tool.handle,
        "agent_id": tool.agent_id,
        "name": tool.name,
        "import_ref": tool.import_ref,
        "description": tool.description,
        "tool_schema_json": canonical_json(tool.json_schema),
        "schema_hash": tool.schema_hash,
        "domains_json": canonical_json(list(tool.domains)),
        "flags_json": canonical_json(tool.flags),
        "updated_at": updated_at,
    }


def agent_from_row(row: AgentRow) -> AgentRecord:
    return AgentRecord(
        agent_id=row.id, name=row.name, config=loads(row.config_json, {}), updated_at=row.updated_at
    )


def agent_to_values(agent: AgentRecord) -> dict[str, Any]:
    """The agent table's column values of ``agent``."""
    return {
        "id": agent.agent_id,
        "name": agent.name,
        "config_json": canonical_json(agent.config),
        "updated_at": agent.updated_at,
    }


def process_from_row(row: ProcessRow) -> ProcessRecord:
    return ProcessRecord(
        process_id=row.id,
        kind=row.kind,
        pid=row.pid,
        host=row.host,
        command=row.command,
        status=row.status,
        started_at=row.started_at,
        heartbeat_at=row.heartbeat_at,
        exit_code=row.exit_code,
        lease_expires_at=row.lease_expires_at,
        lost_at=row.lost_at,
        log_path=row.log_path,
        step=step_from_json(row.step_json),
    )


def step_from_json(text: str | None) -> ProcessStep | None:
    """A stored step; ``None`` for none, and for one this release cannot read."""
    if not text:
        return None
    try:
        return ProcessStep.model_validate_json(text)
    except ValueError:
        return None


def step_to_json(step: ProcessStep | None) -> str | None:
    return None if step is None else step.model_dump_json()


def process_to_values(process: ProcessRecord) -> dict[str, Any]:
    """The process table's column values of ``process``."""
    return {
        "id": process.process_id,
        "kind": process.kind,
        "pid": process.pid,
        "host": process.host,
        "command": process.command,
        "status": process.status,
        "started_at": process.started_at,
        "heartbeat_at": process.heartbeat_at,
        "exit_code": process.exit_code,
        "lease_expires_at": process.lease_expires_at,
        "lost_at": process.lost_at,
        "log_path": process.log_path,
        "step_json": step_to_json(process.step),
    }


def cache_entry_from_row(row: SemanticCacheRow) -> CacheEntry:
    return CacheEntry(
        key=row.key,
        agent_id=row.agent_id,
        context_hash=row.tools_hash,
        query_norm=row.query_norm,
        answer=row.answer,
        embedding=loads(row.embedding_json),
        hits=row.hits,
        created_at=row.created_at,
        last_hit_at=row.last_hit_at,
    )


def cache_entry_to_row(entry: CacheEntry) -> SemanticCacheRow:
    """The semantic_cache row of ``entry`` (the embedding as JSON text, the context hash in the
    ``tools_hash`` column)."""
    embedding = None if entry.embedding is None else json.dumps(entry.embedding)
    return SemanticCacheRow(
        key=entry.key, agent_id=entry.agent_id, tools_hash=entry.context_hash,
        query_norm=entry.query_norm, answer=entry.answer, embedding_json=embedding,
        hits=entry.hits, created_at=entry.created_at, last_hit_at=entry.last_hit_at,
    )  # fmt: skip


def policy_version_from_row(row: PolicyVersionRow | Any) -> PolicyVersion:
    """A stored policy version from its ORM row or a Core row of the policy_version table."""
    return PolicyVersion(
        version=row.version,
        document=loads(row.document_json, {}),
        document_hash=row.document_hash,
        applied_by=row.applied_by,
        applied_at=row.applied_at,
        reason=row.reason,
        audit_seq=row.audit_seq,
    )


def policy_version_to_values(version: PolicyVersion) -> dict[str, Any]:
    """The policy_version table's column values (the document as canonical JSON)."""
    return {
        "version": version.version,
        "document_json": canonical_json(version.document),
        "document_hash": version.document_hash,
        "applied_by": version.applied_by,
        "applied_at": version.applied_at,
        "reason": version.reason,
        "audit_seq": version.audit_seq,
    }


def policy_in_force_from_row(row: sa.Row[Any]) -> PolicyInForce:
    """The policy in force from a row with the ``POLICY_IN_FORCE_COLUMNS`` labels."""
    stored = (
        StoredPolicy(row.policy_in_force, row.policy_hash, row.policy_json)
        if row.policy_in_force is not None
        else None
    )
    return PolicyInForce(stored, row.policy_record)


def policy_rows(rows: Iterable[Any]) -> list[PolicyRow]:
    """Stored policy versions exactly as stored (the document as text)."""
    return [PolicyRow(*(getattr(row, name) for name in PolicyRow._fields)) for row in rows]
