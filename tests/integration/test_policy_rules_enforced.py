"""One policy, applied with ``supervisor policy apply`` in a subprocess, decides calls in every
process that opens the ledger: SDK tools, MCP tools (a real stdio MCP server) and sandbox tools
(real bubblewrap). An allow runs the call with a recorded, audited decision naming the rule; a
deny reaches the model as a ``denied`` outcome with the rule's reason; an ask waits for a person.
The browser worker's share is in ``test_browser_worker.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli
from support.mcp_agent_proc import SERVER_SCRIPT

from supervisor import MemAgent, MemAgentBuilder, governed_tool
from supervisor.ledger.models import ProposalStatus
from supervisor.mcp import close_mcp_tools
from supervisor.store.provider import SQLModelProvider
from supervisor.testing import CallTools, RecordedRequest, Reply, ScriptedModel, ToolCall

POLICY = """
[[rules]]
name = "small refunds"
verdict = "allow"
reason = "Refunds under 100 are routine"
tool = "refund"
args = { country = ["GB", "IE"] }
when = "args.amount < 100"

[[rules]]
name = "refunds abroad"
verdict = "deny"
reason = "Refunds abroad go through the treasury desk"
tool = "refund"
when = "args.country != 'GB'"

[[rules]]
name = "secret lookups"
verdict = "deny"
reason = "Customer secrets are not for agents"
tool = "lookup_customer"
when = "args.field == 'password'"

[[rules]]
name = "small inventory orders"
verdict = "allow"
reason = "Small orders from the inventory server are routine"
tool = "inv__create_order"
target = { mcp_server = "inv" }
when = "args.quantity <= 5"

[[rules]]
name = "no deletes over mcp"
verdict = "deny"
reason = "Deletes are done by a person"
tool = "inv__confirm_delete"

[[rules]]
name = "arithmetic in the local sandbox"
verdict = "allow"
reason = "Pure Python arithmetic in bubblewrap"
tool = "run_code"
target = { backend = "local" }
when = "args.language == 'python' && !args.code.contains('import')"

[[rules]]
name = "no curl in the sandbox"
verdict = "deny"
reason = "No network tools in the sandbox"
tool = "run_command"
when = "args.argv.exists(a, a == 'curl')"
"""

RAN: list[dict[str, Any]] = []


@governed_tool(side_effects=True, domains=("billing",))
def refund(order: str, amount: int, country: str) -> dict[str, Any]:
    """Refund an order."""
    RAN.append({"order": order, "amount": amount})
    return {"refunded": order, "amount": amount}


@governed_tool(deterministic=True, domains=("crm",))
def lookup_customer(customer: str, field: str) -> dict[str, str]:
    """Read one field of a customer record."""
    RAN.append({"lookup": customer, "field": field})
    return {"customer": customer, field: "value"}


def _apply(url: str, tmp_path: Path) -> None:
    with SQLModelProvider(url) as provider:  # the ledger exists before a policy is applied
        provider.ledger.head()
    path = tmp_path / "policy.toml"
    path.write_text(POLICY, encoding="utf-8")
    done = run_cli("policy", "apply", str(path), "--reason", "team policy", "--db", url)
    assert done.returncode == 0, done.stderr
    assert "Applied approval policy v1" in done.stdout


def _agent(model: ScriptedModel, provider: SQLModelProvider, *tools: Any) -> MemAgent:
    config = {"provider": "openai", "model": "scripted-model", "base_url": model.base_url,
              "api_key": "sk-test"}  # fmt: skip
    return (
        MemAgentBuilder().with_agent_id("billing-agent").with_llm_config(config)
        .with_memory_provider(provider).with_tools(list(tools)).build()
    )  # fmt: skip


def _tool_messages(request: RecordedRequest) -> dict[str, Any]:
    return {
        message["tool_call_id"]: json.loads(message["content"])
        for message in request.messages
        if message.get("role") == "tool"
    }


@pytest.fixture(autouse=True)
def _no_calls_yet() -> None:
    RAN.clear()


def test_sdk_calls_are_allowed_denied_or_asked_by_the_rules_and_each_is_audited(
    ledger_url: str, tmp_path: Path
) -> None:
    _apply(ledger_url, tmp_path)
    turn = CallTools([
        ToolCall("refund", {"order": "A-1", "amount": 20, "country": "GB"}, id="small"),
        ToolCall("refund", {"order": "A-2", "amount": 20, "country": "FR"}, id="abroad"),
        ToolCall("lookup_customer", {"customer": "c-1", "field": "email"}, id="email"),
        ToolCall("lookup_customer", {"customer": "c-1", "field": "password"}, id="pw"),
        ToolCall("refund", {"order": "A-3", "amount": 500, "country": "GB"}, id="big"),
    ])  # fmt: skip
    with SQLModelProvider(ledger_url) as provider, ScriptedModel([turn, Reply("ok")]) as model:
        agent = _agent(model, provider, refund, lookup_customer)
        result = agent.run("Refund what you can")
        assert result.status == "awaiting_approval"
        (asked,) = result.proposals
        assert asked.arguments["order"] == "A-3" and asked.status is ProposalStatus.PENDING
        assert RAN == [{"order": "A-1", "amount": 20}, {"lookup": "c-1", "field": "email"}]
        outcomes = {o["call_id"]: o for o in agent.last_tool_outcomes}
        assert outcomes["small"]["status"] == "success"
        assert outcomes["abroad"]["status"] == "denied"
        assert outcomes["abroad"]["reason_code"] == "denied_by_rule"
        assert outcomes["pw"]["status"] == "denied"

        agent.approve(asked.proposal_id, "operator", "checked")
        resumed = agent.resume_approval(asked.proposal_id, continue_model=True)
        assert resumed.ok
        answers = _tool_messages(model.requests[-1])
        assert answers["abroad"]["error"]["code"] == "denied"
        assert answers["abroad"]["error"]["reason"] == "Refunds abroad go through the treasury desk"
        assert "rule refunds abroad (policy v1)" in answers["abroad"]["error"]["message"]
        assert answers["pw"]["error"]["reason"] == "Customer secrets are not for agents"
        assert answers["small"] == {"refunded": "A-1", "amount": 20}

        ledger = provider.ledger
        decided = {p.arguments.get("order") or p.arguments.get("field"): p
                   for p in ledger.list(limit=100).items}  # fmt: skip
        assert set(decided) == {"A-1", "A-2", "password", "A-3"}  # the allowed read: unrecorded
        assert decided["A-1"].status is ProposalStatus.EXECUTED
        assert decided["A-1"].decided_by == "rule small refunds (policy v1)"
        assert decided["A-2"].status is ProposalStatus.REJECTED
        assert decided["A-2"].decided_by == "rule refunds abroad (policy v1)"
        assert decided["password"].decided_by == "rule secret lookups (policy v1)"
        assert decided["A-3"].decided_by == "operator" and decided["A-3"].decided_by_rule is None
        by_subject: dict[str, list[Any]] = {}
        for record in ledger.events_since(0):
            by_subject.setdefault(record.subject, []).append(record)
        small = [(r.action, r.actor) for r in by_subject[decided["A-1"].proposal_id]]
        assert small[:2] == [("propose", "billing-agent"), ("approve", "rule:small refunds")]
        approve = by_subject[decided["A-1"].proposal_id][1].payload
        assert approve["policy_version"] == 1
        assert approve["decided_by"] == "rule small refunds (policy v1)"
        assert [r.action for r in by_subject[decided["A-2"].proposal_id]] == ["propose", "reject"]
        traced = [e for e in ledger.trace_events(kind="approval") if e.payload.get("decided_by")]
        assert {e.payload["decided_by"] for e in traced} == {
            "rule small refunds (policy v1)", "rule refunds abroad (policy v1)",
            "rule secret lookups (policy v1)",
        }  # fmt: skip
    verified = run_cli("audit", "verify", "--db", ledger_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    shown = run_cli("proposals", "show", decided["A-1"].proposal_id, "--db", ledger_url)
    assert "rule small refunds (policy v1)" in shown.stdout


def test_mcp_tools_are_decided_by_the_same_policy(sqlite_url: str, tmp_path: Path) -> None:
    _apply(sqlite_url, tmp_path)
    count_file = tmp_path / "mcp_calls.jsonl"
    turn = CallTools([
        ToolCall("inv__create_order", {"sku": "A-1", "quantity": 2}, id="small"),
        ToolCall("inv__confirm_delete", {"path": "/orders/A-1"}, id="delete"),
    ])  # fmt: skip
    with SQLModelProvider(sqlite_url) as provider, ScriptedModel([turn, Reply("ok")]) as model:
        config = {"provider": "openai", "model": "scripted-model", "base_url": model.base_url,
                  "api_key": "sk-test"}  # fmt: skip
        agent = (
            MemAgentBuilder().with_agent_id("inventory-agent").with_llm_config(config)
            .with_memory_provider(provider)
            .with_mcp_server("inv", command=[sys.executable, SERVER_SCRIPT], trust="trusted",
                             env={"MCP_COUNT_FILE": str(count_file)})
            .build()
        )  # fmt: skip
        try:
            result = agent.run("Order two A-1 and delete the old order")
        finally:
            close_mcp_tools(agent.tools)
        assert result.status == "completed", result
        answers = _tool_messages(model.requests[-1])
        assert answers["small"] == {"order": "order-A-1-2"}
        assert answers["delete"]["error"]["reason"] == "Deletes are done by a person"
        calls = [json.loads(line) for line in count_file.read_text().splitlines()]
        assert [call["tool"] for call in calls] == ["create_order"]
        (order,) = provider.ledger.list(tool_name="inv__create_order").items
        assert order.status is ProposalStatus.EXECUTED
        assert calls[0]["key"] == order.proposal_id  # the idempotency key of the ruled call
        assert order.decided_by == "rule small inventory orders (policy v1)"


def test_sandbox_tools_are_decided_by_the_same_policy(sqlite_url: str, tmp_path: Path) -> None:
    from sandboxes import configure_sandbox_tools, run_code, run_command
    from sandboxes.models import Limits

    _apply(sqlite_url, tmp_path)
    turn = CallTools([
        ToolCall("run_code", {"language": "python", "code": "print(6 * 7)", "files": {}},
                 id="math"),
        ToolCall("run_command", {"argv": ["curl", "http://example.com"]}, id="curl"),
        ToolCall("run_code", {"language": "python", "code": "import os", "files": {}},
                 id="imports"),
    ])  # fmt: skip
    with SQLModelProvider(sqlite_url) as provider, ScriptedModel([turn]) as model:
        configure_sandbox_tools(backend="local", ledger=provider.ledger, limits=Limits())
        try:
            agent = _agent(model, provider, run_code, run_command)
            result = agent.run("Compute 6 * 7")
        finally:
            configure_sandbox_tools(limits=Limits())
        assert result.status == "awaiting_approval"
        (asked,) = result.proposals
        assert asked.arguments["code"] == "import os"
        outcomes = {o["call_id"]: o for o in agent.last_tool_outcomes}
        assert outcomes["math"]["status"] == "success"
        assert outcomes["curl"]["status"] == "denied"
        (math,) = provider.ledger.list(tool_name="run_code", status="executed").items
        assert math.decided_by == "rule arithmetic in the local sandbox (policy v1)"
        runs = [p for p in provider.ledger.list_processes() if p.kind.startswith("sandbox")]
        assert len(runs) == 1 and runs[0].exit_code == 0  # curl never started


def test_a_stored_policy_that_cannot_be_read_decides_nothing(
    sqlite_url: str, tmp_path: Path
) -> None:
    _apply(sqlite_url, tmp_path)
    with SQLModelProvider(sqlite_url) as provider:
        engine = provider.engine
        with engine.begin() as connection:
            connection.exec_driver_sql(
                "UPDATE policy_version SET document_json = replace(document_json, "
                "'\"allow\"', '\"deny\"')"
            )
        proposal = provider.ledger.propose(
            "refund", refund.schema_hash, {"order": "A-1", "amount": 20, "country": "GB"},
            owner="billing-agent",
        )  # fmt: skip
    assert proposal.status is ProposalStatus.PENDING
    assert proposal.decided_by_rule is None
    assert "the stored policy cannot be read" in proposal.policy_reason


def test_a_later_policy_binds_a_process_that_opened_the_ledger_before_it(
    sqlite_url: str, tmp_path: Path
) -> None:
    arguments = {"order": "A-1", "amount": 20, "country": "GB"}
    with SQLModelProvider(sqlite_url) as provider:
        before = provider.ledger.propose("refund", refund.schema_hash, arguments)
        _apply(sqlite_url, tmp_path)  # another process applies it
        after = provider.ledger.propose("refund", refund.schema_hash, arguments)
    assert before.status is ProposalStatus.PENDING
    assert after.status is ProposalStatus.APPROVED and after.policy_version == 1


def test_policy_show_prints_the_rules_as_a_file_apply_reads_back(
    sqlite_url: str, tmp_path: Path
) -> None:
    _apply(sqlite_url, tmp_path)
    shown = run_cli("policy", "show", "--db", sqlite_url)
    assert shown.returncode == 0, shown.stderr
    assert '[[rules]]\nname = "small refunds"' in shown.stdout
    assert 'args = { country = ["GB", "IE"] }' in shown.stdout
    again = tmp_path / "again.toml"
    again.write_text(shown.stdout, encoding="utf-8")
    same = run_cli("policy", "diff", str(again), "--db", sqlite_url)
    assert same.returncode == 0 and "No change" in same.stdout, same.stdout + same.stderr
    changed = tmp_path / "changed.toml"
    changed.write_text(
        POLICY.replace("args.amount < 100", "args.amount < 50")
        + '\n[[rules]]\nname = "new"\nverdict = "ask"\nreason = "r"\ntool = "x"\n',
        encoding="utf-8",
    )
    diff = run_cli("policy", "diff", str(changed), "--db", sqlite_url)
    assert diff.returncode == 1, diff.stderr
    assert '~ rule small refunds: when: "args.amount < 100" -> "args.amount < 50"' in diff.stdout
    assert '+ rule new: { name = "new"' in diff.stdout
    reapplied = run_cli("policy", "apply", str(again), "--db", sqlite_url)
    assert "Unchanged" in reapplied.stdout


def test_a_quorum_rule_needs_two_distinct_os_identities_on_postgres(
    postgres_url: str, tmp_path: Path
) -> None:
    import os

    from support.required import unavailable

    if os.geteuid() != 0:
        unavailable("needs root to run an approver as another OS user",
                    in_ci="CI runs as root so it can test another OS identity")  # fmt: skip
    as_user = Path(__file__).resolve().parents[1] / "support" / "as_user.py"
    path = tmp_path / "quorum.toml"
    with SQLModelProvider(postgres_url) as provider:
        provider.ledger.head()
    path.write_text(
        '[approval]\nforbid_self_approval = true\n\n[[rules]]\nname = "large refunds"\n'
        'verdict = "ask"\napprovals = 2\nreason = "Two people sign refunds over 1000"\n'
        'tool = "refund"\nwhen = "args.amount >= 1000"\n',
        encoding="utf-8",
    )
    assert run_cli("policy", "apply", str(path), "--db", postgres_url).returncode == 0
    arguments = {"order": "B-1", "amount": 5000, "country": "GB"}
    with SQLModelProvider(postgres_url) as provider:
        big = provider.ledger.propose("refund", refund.schema_hash, arguments, user="nobody")
        mine = provider.ledger.propose("refund", refund.schema_hash, arguments, user="carol")
    assert big.approvals_required == 2 and big.quorum == "0 of 2 approvals"

    first = run_cli("proposals", "approve", big.proposal_id, "--json", "--db", postgres_url)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["status"] == "pending"
    again = run_cli("proposals", "approve", big.proposal_id, "--approver", "someone-else",
                    "--db", postgres_url)  # fmt: skip
    assert again.returncode == 2 and "quorum_vote_repeated" in again.stderr
    shown = run_cli("proposals", "show", big.proposal_id, "--db", postgres_url)
    assert "1 of 2 approvals" in shown.stdout
    with SQLModelProvider(postgres_url) as provider, pytest.raises(Exception) as refused:
        provider.ledger.claim(big.proposal_id, big.args_hash, "agent:billing")
    assert "not_approved" in repr(refused.value) or "NotApproved" in repr(refused.value)

    def as_nobody(proposal_id: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(as_user), "nobody", "proposals", "approve", proposal_id,
             "--json", "--db", postgres_url],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    self_vote = as_nobody(big.proposal_id)  # nobody is the proposal's user: refused
    assert self_vote.returncode == 2 and "self_approval_forbidden" in self_vote.stderr
    first_mine = run_cli("proposals", "approve", mine.proposal_id, "--db", postgres_url)
    assert first_mine.returncode == 0, first_mine.stderr
    second = as_nobody(mine.proposal_id)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["status"] == "approved"
    with SQLModelProvider(postgres_url) as provider:
        approved = provider.ledger.get(mine.proposal_id)
        assert [vote.identity.split("@")[0] for vote in approved.approvals] == ["root"]
        provider.ledger.claim(mine.proposal_id, mine.args_hash, "agent:billing")
        assert provider.ledger.get(big.proposal_id).status is ProposalStatus.PENDING
    verified = run_cli("audit", "verify", "--db", postgres_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr
