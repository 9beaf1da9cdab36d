"""The toolbox on a real ledger (SQLite and PostgreSQL) and across real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.agents import create_customer, inventory_lookup

from supervisor.errors import ReferenceNotAllowed
from supervisor.runtime.policies import ContextPolicy
from supervisor.store.provider import SQLModelProvider
from supervisor.toolbox import Toolbox, tool_handle
from supervisor.tools import ToolRegistry, governed_tool

DATA = Path(__file__).resolve().parents[1] / "data"
REPO = Path(__file__).resolve().parents[2]


@governed_tool(domains=("inventory",), name="inventory_lookup")
def inventory_lookup_v2(sku: str) -> dict[str, Any]:
    """Return current inventory for one SKU in every warehouse."""
    return {"sku": sku}


def test_seed_toolbox_snippet_runs(sqlite_url: str) -> None:
    provider = SQLModelProvider(sqlite_url)
    toolbox = Toolbox.from_functions(
        [inventory_lookup, create_customer],
        memory_provider=provider,
        agent_id="operations-agent",
        augment=False,
    )
    records = {record.name: record for record in provider.ledger.list_tools("operations-agent")}
    assert set(records) == {"inventory_lookup", "create_customer"}
    crm = records["create_customer"]
    assert crm.handle == toolbox.handle_for("create_customer")
    assert crm.domains == ("crm",)
    assert crm.flags["requires_approval"] is True
    assert crm.flags["side_effects"] is True
    assert crm.import_ref == create_customer.import_ref
    assert crm.schema_hash == create_customer.schema_hash
    assert "strict" not in crm.json_schema  # the contract, never code
    selection = toolbox.select("stock for SKU A1 in new-york", ContextPolicy(tool_top_k=4))
    assert selection.ranked[0].name == "inventory_lookup"
    tool = toolbox.resolve_handle(selection.handles[0], ContextPolicy(tool_top_k=4))
    assert tool.dispatch({"sku": "A1", "warehouse": "new-york"}).ok
    provider.close()


def test_registration_is_idempotent(ledger_url: str) -> None:
    provider = SQLModelProvider(ledger_url)
    first = Toolbox.from_functions(
        [inventory_lookup, create_customer], memory_provider=provider, agent_id="ops"
    )
    again = Toolbox.from_functions(
        [create_customer, inventory_lookup], memory_provider=provider, agent_id="ops"
    )
    assert first.handles() == again.handles()
    records = provider.ledger.list_tools("ops")
    assert sorted(record.handle for record in records) == sorted(first.handles().values())
    other_agent = Toolbox.from_functions([inventory_lookup], memory_provider=provider, agent_id="b")
    assert other_agent.handle_for("inventory_lookup") != first.handle_for("inventory_lookup")
    assert len(provider.ledger.list_tools("ops")) == 2
    provider.close()


def test_changed_contract_gets_new_handle_and_retires_old(sqlite_url: str) -> None:
    provider = SQLModelProvider(sqlite_url)
    old = Toolbox.from_functions([inventory_lookup], memory_provider=provider, agent_id="ops")
    new = Toolbox.from_functions([inventory_lookup_v2], memory_provider=provider, agent_id="ops")
    old_handle, new_handle = old.handle_for("inventory_lookup"), new.handle_for("inventory_lookup")
    assert old_handle != new_handle
    flags = {record.handle: record.flags for record in provider.ledger.list_tools("ops")}
    assert flags[old_handle]["active"] is False
    assert flags[old_handle]["superseded_by"] == new_handle
    loaded = Toolbox.load(provider, "ops", [inventory_lookup_v2])
    assert loaded.handles() == {"inventory_lookup": new_handle}
    provider.close()


def test_load_rebinds_from_live_tools_or_allowlisted_references(sqlite_url: str) -> None:
    provider = SQLModelProvider(sqlite_url)
    built = Toolbox.from_functions(
        [inventory_lookup, create_customer], memory_provider=provider, agent_id="ops"
    )
    live = Toolbox.load(provider, "ops", [inventory_lookup, create_customer])
    assert live.handles() == built.handles()
    with pytest.raises(ReferenceNotAllowed):
        Toolbox.load(provider, "ops", ToolRegistry())
    assert len(Toolbox.load(provider, "ops", ToolRegistry(), missing="skip")) == 0
    assert create_customer.import_ref is not None
    module = create_customer.import_ref.partition(":")[0]
    imported = Toolbox.load(provider, "ops", ToolRegistry(allowlist=[f"{module}:*"]))
    assert imported.handles() == built.handles()
    assert imported.resolve_name("create_customer", ContextPolicy()) is create_customer
    provider.close()


_CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from toolbox_dataset import load_queries, load_tools
    from supervisor.runtime.policies import ContextPolicy
    from supervisor.toolbox import Toolbox

    toolbox = Toolbox.from_functions(load_tools(), agent_id="determinism")
    policy = ContextPolicy(tool_top_k=5)
    traces = [toolbox.select(q.query, policy).trace() for q in load_queries()[:80]]
    print(json.dumps({"handles": toolbox.handles(), "traces": traces}))
    """
)


def test_rankings_and_handles_are_identical_across_processes() -> None:
    sys.path.insert(0, str(DATA))
    from toolbox_dataset import load_queries, load_tools

    toolbox = Toolbox.from_functions(load_tools(), agent_id="determinism")
    policy = ContextPolicy(tool_top_k=5)
    traces = [toolbox.select(q.query, policy).trace() for q in load_queries()[:80]]
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(DATA)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    other = json.loads(child.stdout)
    assert other["handles"] == toolbox.handles()
    assert other["traces"] == traces
    spec = load_tools()[0]
    assert other["handles"][spec.name] == tool_handle("determinism", spec.name, spec.schema_hash)
