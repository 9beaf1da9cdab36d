"""``supervisor mcp-server`` driven by the official ``mcp`` client over stdio."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from supervisor.ledger.models import TraceEvent
from supervisor.store.provider import SQLModelProvider

SECRET = "sk-live-0123456789abcdefghij"


@pytest.fixture
def ledger_with_proposals(sqlite_url: str) -> Iterator[dict[str, str]]:
    with SQLModelProvider(sqlite_url) as provider:
        ledger = provider.ledger
        secretive = ledger.propose(
            "crm__create_customer", "a" * 64,
            {"name": "Ada", "api_key": SECRET, "note": f"password=hunter2 token {SECRET}",
             "nested": {"auth_header": "Basic abc", "city": "London"}},
            owner="ops", user="bob", policy_reason="Creates a customer",
        )  # fmt: skip
        plain = ledger.propose("crm__lookup", "b" * 64, {"sku": "A-1"}, owner="ops")
        decided = ledger.propose("crm__lookup", "b" * 64, {"sku": "B-2"}, owner="ops")
        ledger.reject(decided.proposal_id, "operator@example.com", "no")
        ledger.append_trace(
            [
                TraceEvent(
                    at=plain.created_at, agent_id="ops", run_id="r1", kind="tool_result",
                    tool="crm__lookup", outcome_status="fallback", reason_code="primary_timeout",
                    payload={"call_id": "c1", "error_detail": SECRET,
                             "outcome": {"status": "fallback", "degraded": True,
                                         "result_count": 3, "latency_ms": 12.5}},
                ),
                TraceEvent(at=plain.created_at, agent_id="ops", run_id="r1", kind="model_call",
                           payload={"usage": {"total_tokens": 10}}),
            ]
        )  # fmt: skip
        yield {"secretive": secretive.proposal_id, "plain": plain.proposal_id}


def _server(sqlite_url: str, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", "from supervisor.cli.main import main; main()", "mcp-server", "--db",
              sqlite_url, *flags],
        env={"PATH": os.environ.get("PATH", "")},
    )  # fmt: skip


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result
    return result.structured_content


async def test_mcp_server_is_read_only_and_has_no_approve_tool(
    sqlite_url: str, ledger_with_proposals: dict[str, str]
) -> None:
    async with Client(_server(sqlite_url)) as client:
        listing = await client.list_tools()
        names = {tool.name for tool in listing.tools}
        assert names == {"list_pending_proposals", "read_outcome_evidence", "trace_statistics"}
        assert not any(
            word in name for name in names for word in ("approve", "reject", "cancel", "decide")
        )
        for tool in listing.tools:
            assert tool.annotations is not None and tool.annotations.read_only_hint is True
        assert client.instructions is not None and "no approve" in client.instructions
        refused = await client.call_tool("approve", {"proposal_id": "x"})
        assert refused.is_error


async def test_lists_pending_proposals_as_keys_and_sizes_by_default(
    sqlite_url: str, ledger_with_proposals: dict[str, str]
) -> None:
    async with Client(_server(sqlite_url)) as client:
        listed = await _call(client, "list_pending_proposals", {})
    assert listed["count"] == 2
    by_id = {item["proposal_id"]: item for item in listed["proposals"]}
    secretive = by_id[ledger_with_proposals["secretive"]]
    assert secretive["arguments_mode"] == "keys_and_sizes"
    assert secretive["arguments"] == {
        "name": "<string: 3 chars>",
        "api_key": f"<string: {len(SECRET)} chars>",
        "note": f"<string: {len(f'password=hunter2 token {SECRET}')} chars>",
        "nested": {"auth_header": "<string: 9 chars>", "city": "<string: 6 chars>"},
    }
    assert by_id[ledger_with_proposals["plain"]]["arguments"] == {"sku": "<string: 3 chars>"}
    for value in ("Ada", "London", "hunter2", SECRET, "A-1"):
        assert value not in str(listed)


async def test_lists_pending_proposals_with_secrets_redacted(
    sqlite_url: str, ledger_with_proposals: dict[str, str]
) -> None:
    async with Client(_server(sqlite_url, "--show-values")) as client:
        listed = await _call(client, "list_pending_proposals", {})
    assert listed["count"] == 2
    by_id = {item["proposal_id"]: item for item in listed["proposals"]}
    assert set(by_id) == set(ledger_with_proposals.values())
    arguments = by_id[ledger_with_proposals["secretive"]]["arguments"]
    assert arguments["name"] == "Ada"
    assert arguments["api_key"] == "[REDACTED]"
    assert arguments["nested"] == {"auth_header": "[REDACTED]", "city": "London"}
    assert "hunter2" not in arguments["note"] and SECRET not in arguments["note"]
    assert SECRET not in str(listed)
    assert by_id[ledger_with_proposals["plain"]]["arguments"] == {"sku": "A-1"}
    assert by_id[ledger_with_proposals["secretive"]]["status"] == "pending"


async def test_outcome_evidence_and_statistics_are_content_free(
    sqlite_url: str, ledger_with_proposals: dict[str, str]
) -> None:
    async with Client(_server(sqlite_url)) as client:
        evidence = await _call(client, "read_outcome_evidence", {"run_id": "r1"})
        by_tool = await _call(client, "read_outcome_evidence", {"tool": "crm__lookup"})
        stats = await _call(client, "trace_statistics", {})
    (event,) = evidence["events"]
    assert event["tool"] == "crm__lookup" and event["outcome_status"] == "fallback"
    assert event["outcome"] == {
        "status": "fallback", "degraded": True, "result_count": 3, "latency_ms": 12.5,
    }  # fmt: skip
    assert SECRET not in str(evidence)
    assert by_tool["count"] == 1
    assert stats["tool_results"] == 1
    assert stats["fallback_rate"] == 1.0 and stats["degraded_rate"] == 1.0
    assert stats["rejected"] == 1 and stats["proposals_by_status"]["pending"] == 2
