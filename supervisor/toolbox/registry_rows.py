"""The toolbox's rows in the ledger's tool registry, and the stable handles that key them.

A handle is ``"tb_"`` plus the first 16 hex digits of the SHA-256 of the canonical JSON
``{"agent": agent_id, "name": tool_name, "schema_hash": schema_hash}``: the same tool contract
registered by the same agent has the same handle in every process; a changed contract gets a new
handle, and the record of the old one is kept but marked inactive (``flags.active = false``)
so history stays readable and nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from supervisor.canonical import canonical_hash
from supervisor.ledger.models import ToolRecord
from supervisor.tools.contract import Tool

HANDLE_PREFIX = "tb_"
HANDLE_HEX_DIGITS = 16


class ToolRegistryStore(Protocol):
    """The part of the ledger the toolbox uses."""

    def upsert_tool(self, tool: ToolRecord) -> ToolRecord: ...

    def list_tools(self, agent_id: str | None = None) -> list[ToolRecord]: ...


def tool_handle(agent_id: str, tool_name: str, schema_hash: str) -> str:
    """The stable handle of a tool contract registered by an agent.

    Args:
        agent_id: The owning agent.
        tool_name: The tool's name.
        schema_hash: The tool's schema hash (its contract).

    Returns:
        ``"tb_"`` followed by 16 lowercase hex digits.
    """
    digest = canonical_hash({"agent": agent_id, "name": tool_name, "schema_hash": schema_hash})
    return HANDLE_PREFIX + digest[:HANDLE_HEX_DIGITS]


def tool_record(agent_id: str, handle: str, tool: Tool, users: frozenset[str] | None) -> ToolRecord:
    """The ledger row of one toolbox tool: contract, scope and policy flags (never code)."""
    policy = tool.policy
    flags: dict[str, Any] = {
        "active": True,
        "requires_approval": policy.requires_approval,
        "side_effects": policy.side_effects,
        "deterministic": policy.deterministic,
        "cacheable": policy.cacheable,
        "approval_reason": policy.approval_reason,
        "users": sorted(users) if users is not None else None,
    }
    return ToolRecord(
        handle=handle,
        agent_id=agent_id,
        name=tool.name,
        import_ref=tool.import_ref,
        description=tool.description,
        json_schema=tool.json_schema,
        schema_hash=tool.schema_hash,
        domains=policy.domains,
        flags=flags,
    )


def record_users(record: ToolRecord) -> frozenset[str] | None:
    """The user scope stored in a record (``None``: every user)."""
    users = record.flags.get("users")
    if users is None:
        return None
    return frozenset(str(user) for user in users)


def is_active(record: ToolRecord) -> bool:
    """Whether a record is the current contract of its tool."""
    return bool(record.flags.get("active", True))


def sync_records(store: ToolRegistryStore, agent_id: str, records: Iterable[ToolRecord]) -> int:
    """Upsert ``records`` by handle, writing only what changed; retire replaced contracts.

    A stored active record with the same tool name but another handle is rewritten with
    ``active = false`` and ``superseded_by`` set.

    Returns:
        How many rows were written.
    """
    stored = {record.handle: record for record in store.list_tools(agent_id)}
    wanted = list(records)
    current_by_name = {record.name: record.handle for record in wanted}
    writes = 0
    for record in wanted:
        if stored.get(record.handle) != record:
            store.upsert_tool(record)
            writes += 1
    for record in stored.values():
        replacement = current_by_name.get(record.name)
        if replacement is not None and replacement != record.handle and is_active(record):
            flags = {**record.flags, "active": False, "superseded_by": replacement}
            store.upsert_tool(record.model_copy(update={"flags": flags}))
            writes += 1
    return writes


def retire_record(store: ToolRegistryStore, agent_id: str, handle: str) -> bool:
    """Mark a stored record inactive (removed from the toolbox). Returns whether one changed."""
    for record in store.list_tools(agent_id):
        if record.handle == handle and is_active(record):
            store.upsert_tool(
                record.model_copy(update={"flags": {**record.flags, "active": False}})
            )
            return True
    return False
