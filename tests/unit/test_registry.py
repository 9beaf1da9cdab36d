"""The tool registry: names, duplicates, allowlisted import references."""

from __future__ import annotations

import sys

import pytest
from support.agents import create_customer, inventory_lookup

from supervisor import ToolRegistry, governed_tool
from supervisor.errors import (
    DuplicateToolError,
    ReferenceMismatch,
    ReferenceNotAllowed,
    UnknownToolError,
)


def test_register_get_and_idempotence() -> None:
    registry = ToolRegistry([inventory_lookup, create_customer])
    assert registry.names() == ["inventory_lookup", "create_customer"]
    assert registry.register(inventory_lookup) is inventory_lookup
    assert len(registry) == 2
    assert registry.get("create_customer") is create_customer
    with pytest.raises(UnknownToolError):
        registry.get("nope")


def test_a_second_tool_with_the_same_name_is_an_error_unless_replaced() -> None:
    @governed_tool(name="inventory_lookup")
    def impostor(sku: str) -> str:
        """Different."""
        return sku

    registry = ToolRegistry([inventory_lookup])
    with pytest.raises(DuplicateToolError):
        registry.register(impostor)
    assert registry.register(impostor, replace=True) is impostor
    assert registry.get("inventory_lookup") is impostor


def test_plain_functions_get_default_policy() -> None:
    def lookup(sku: str) -> str:
        return sku

    tool = ToolRegistry().register(lookup)
    assert tool.policy.requires_approval is False
    assert tool.dispatch({"sku": "x"}).value == "x"


def test_entries_carry_reference_and_hash() -> None:
    (entry,) = ToolRegistry([create_customer]).entries()
    assert entry.import_ref == "support.agents:create_customer"
    assert entry.schema_hash == create_customer.schema_hash
    assert entry.requires_approval is True


def test_reference_off_the_allowlist_is_never_imported() -> None:
    module = "tests_fixture_never_imported"
    registry = ToolRegistry(allowlist=["support.agents:inventory_lookup"])
    with pytest.raises(ReferenceNotAllowed):
        registry.resolve(f"{module}:tool")
    with pytest.raises(ReferenceNotAllowed):
        registry.resolve("support.agents:create_customer")
    assert module not in sys.modules


def test_allowlisted_references_resolve_by_exact_name_or_module_wildcard() -> None:
    exact = ToolRegistry(allowlist=["support.agents:inventory_lookup"])
    assert exact.resolve("support.agents:inventory_lookup") is inventory_lookup
    wildcard = ToolRegistry(allowlist=["support.agents:*"])
    assert wildcard.resolve("support.agents:create_customer") is create_customer


def test_reference_must_name_a_governed_tool_with_the_recorded_contract() -> None:
    registry = ToolRegistry(allowlist=["support.agents:*"])
    with pytest.raises(ReferenceMismatch):
        registry.resolve("support.agents:ToolResult")
    with pytest.raises(ReferenceMismatch):
        registry.resolve("support.agents:inventory_lookup", expected_schema_hash="0" * 64)
    with pytest.raises(ReferenceMismatch):
        registry.resolve("not-a-reference")


def test_rebind_prefers_live_tools_then_allowlisted_references() -> None:
    live = ToolRegistry([inventory_lookup])
    assert live.rebind("inventory_lookup", None, inventory_lookup.schema_hash) is inventory_lookup
    with pytest.raises(ReferenceMismatch):
        live.rebind("inventory_lookup", None, "f" * 64)
    empty = ToolRegistry(allowlist=["support.agents:create_customer"])
    rebound = empty.rebind(
        "create_customer", create_customer.import_ref, create_customer.schema_hash
    )
    assert rebound is create_customer
    assert "create_customer" in empty
    with pytest.raises(UnknownToolError):
        ToolRegistry().rebind("ghost", None, "0" * 64)
