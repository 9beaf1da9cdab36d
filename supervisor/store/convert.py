"""Conversions between table rows and the domain models."""

from __future__ import annotations

import json
from typing import Any

from supervisor.canonical import canonical_json
from supervisor.ledger.models import (
    AgentRecord,
    ApproverContext,
    AuditRecord,
    Checkpoint,
    Execution,
    ExecutorIdentity,
    ProcessRecord,
    Proposal,
    ProposalStatus,
    ToolRecord,
    TraceEvent,
)
from supervisor.ledger.policy import PolicyVersion
from supervisor.store.tables import (
    AgentRow,
    AuditRow,
    CheckpointRow,
    ExecutionRow,
    PolicyVersionRow,
    ProcessRow,
    ProposalRow,
    ToolRegistryRow,
    TraceEventRow,
)


def loads(text: str | None, default: Any = None) -> Any:
    """Parse stored JSON text; empty or ``None`` gives ``default``."""
    return json.loads(text) if text else default


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
    }


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


def audit_from_row(row: AuditRow) -> AuditRecord:
    return AuditRecord(
        seq=row.seq,
        at=row.at,
        actor=row.actor,
        action=row.action,
        subject=row.subject,
        payload=loads(row.payload_json, {}),
        prev_hash=row.prev_hash,
        hash=row.hash,
    )


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


def agent_from_row(row: AgentRow) -> AgentRecord:
    return AgentRecord(
        agent_id=row.id, name=row.name, config=loads(row.config_json, {}), updated_at=row.updated_at
    )


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
    )


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
