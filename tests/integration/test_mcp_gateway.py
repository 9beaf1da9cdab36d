"""``supervisor mcp-gateway``: any MCP client, a real MCP server behind the durable gate.

Real processes throughout: the official ``mcp`` Python client and the MCP Inspector CLI launch
``supervisor mcp-gateway -- python tests/support/mcp_notes_server.py``; decisions come from
``supervisor proposals approve|reject`` in other processes; crashes are SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import ToolListChangedNotification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from support.cli import SUPERVISOR, run_cli
from support.mcp_gateway import NOTES_SERVER, OWNER
from support.mcp_gateway import notes as _notes
from support.mcp_gateway import until as _until
from support.required import unavailable

from supervisor import SQLModelProvider
from supervisor.ledger.models import Proposal, ProposalStatus

TESTS_DIR = Path(__file__).resolve().parents[1]
INSPECTOR = TESTS_DIR / "node" / "mcp-inspector" / "node_modules" / ".bin" / "mcp-inspector"
pytestmark = pytest.mark.slow


def _gateway_command(*extra: str, trust: str = "trusted") -> list[str]:
    assert SUPERVISOR is not None
    return [SUPERVISOR, "mcp-gateway", "--name", "notes", "--trust", trust, "--progress-every",
            "0.5", *extra, "--", sys.executable, NOTES_SERVER]  # fmt: skip


def _pending(url: str) -> Proposal | None:
    with SQLModelProvider(url) as provider:
        page = provider.ledger.list(status=ProposalStatus.PENDING, owner=OWNER)
        return page.items[0] if page.items else None


def _proposal(url: str, proposal_id: str) -> Proposal:
    with SQLModelProvider(url) as provider:
        return provider.ledger.get(proposal_id)


def _freeze_between_writes(process: subprocess.Popen[bytes], url: str) -> None:
    """SIGSTOP ``process`` at a moment it holds no SQLite write lock.

    Stopped inside a write transaction (a heartbeat, a sweep) it would keep the lock for as
    long as it is stopped, and every other writer of the ledger would get ``ledger_busy``."""
    path = url.removeprefix("sqlite:///")
    deadline = time.monotonic() + 30
    while True:
        os.kill(process.pid, signal.SIGSTOP)
        probe = sqlite3.connect(path, timeout=0.2, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            if time.monotonic() > deadline:
                raise
        finally:
            probe.close()
        os.kill(process.pid, signal.SIGCONT)
        time.sleep(0.05)


def _gateway_pid(url: str) -> int:
    def find() -> int | None:
        with SQLModelProvider(url) as provider:
            rows = [p for p in provider.ledger.list_processes() if p.kind == "mcp-gateway"
                    and p.status in ("running", "waiting_for_approval")]  # fmt: skip
        return rows[-1].pid if rows else None

    pid: int = _until(find, what="the gateway's process row")
    return pid


@pytest.fixture
def env(sqlite_url: str, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SUPERVISOR_DB": sqlite_url, "NOTES_FILE": str(tmp_path / "notes.jsonl")}


async def _session_call(
    environment: dict[str, str],
    body: Callable[[ClientSession], Any],
    received: list[Any] | None = None,
) -> Any:
    command = _gateway_command()
    params = StdioServerParameters(command=command[0], args=command[1:], env=environment)

    async def on_message(message: Any) -> None:
        if received is not None:
            received.append(message)

    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        await session.initialize()
        return await body(session)


def test_python_client_reads_pass_through_and_a_mutation_runs_once_after_cli_approval(
    env: dict[str, str], sqlite_url: str
) -> None:
    notes = Path(env["NOTES_FILE"])
    messages: list[str] = []

    async def body(session: ClientSession) -> dict[str, Any]:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(listed) == {"read_notes", "append_note", "upgrade_notes"}
        assert listed["read_notes"].annotations is not None
        assert listed["read_notes"].annotations.read_only_hint is True
        assert listed["append_note"].input_schema["required"] == ["text"]
        read = await session.call_tool("read_notes", {})
        assert not read.is_error and read.structured_content == {"notes": []}

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            messages.append(message or "")

        call = asyncio.ensure_future(
            session.call_tool("append_note", {"text": "hello"}, progress_callback=on_progress)
        )
        proposal = await asyncio.to_thread(_until, lambda: _pending(sqlite_url), 60, "proposal")
        await asyncio.to_thread(_until, lambda: messages, 30, "a progress notification")
        assert not call.done()
        assert _notes(notes) == []  # nothing reached the server before approval
        with SQLModelProvider(sqlite_url) as provider:
            (row,) = [p for p in provider.ledger.list_processes() if p.kind == "mcp-gateway"]
            assert row.status == "waiting_for_approval"
            assert row.step is not None and row.step.kind == "waiting_for_approval"
        approve = await asyncio.to_thread(
            run_cli, "proposals", "approve", proposal.proposal_id, "--db", sqlite_url
        )
        assert approve.returncode == 0, approve.stderr
        with SQLModelProvider(sqlite_url) as provider:
            waiter = provider.ledger.waiters([proposal.proposal_id])[proposal.proposal_id]
            assert waiter.process is not None and waiter.process.kind == "mcp-gateway"
        result = await asyncio.wait_for(call, 60)
        again = await session.call_tool("append_note", {"text": "hello"})  # a client retry
        after = await session.call_tool("read_notes", {})
        return {"proposal": proposal, "result": result, "again": again, "after": after}

    out = asyncio.run(_session_call(env, body))
    proposal: Proposal = out["proposal"]
    assert messages[0] == f"waiting for approval of {proposal.proposal_id}"
    assert not out["result"].is_error
    assert out["result"].structured_content == {"appended": "hello"}
    assert out["again"].structured_content == {"appended": "hello"}  # the recorded result
    assert out["after"].structured_content == {"notes": ["hello"]}
    assert _notes(Path(env["NOTES_FILE"])) == [{"text": "hello", "key": proposal.proposal_id}]
    done = _proposal(sqlite_url, proposal.proposal_id)
    assert done.status is ProposalStatus.EXECUTED
    assert done.runtime == "mcp:notes" and done.tool_name == "notes__append_note"
    assert done.execution_target["mcp_server"] == "notes"
    with SQLModelProvider(sqlite_url) as provider:  # reads unrecorded, the retry replayed
        assert [p.proposal_id for p in provider.ledger.list(limit=50).items] == [
            proposal.proposal_id
        ]


def test_python_client_gets_an_error_result_for_a_rejection(
    env: dict[str, str], sqlite_url: str
) -> None:
    async def body(session: ClientSession) -> Any:
        call = asyncio.ensure_future(session.call_tool("append_note", {"text": "nope"}))
        proposal = await asyncio.to_thread(_until, lambda: _pending(sqlite_url), 60, "proposal")
        rejected = await asyncio.to_thread(
            run_cli, "proposals", "reject", proposal.proposal_id, "--reason", "not today",
            "--db", sqlite_url,
        )  # fmt: skip
        assert rejected.returncode == 0, rejected.stderr
        return await asyncio.wait_for(call, 60)

    result = asyncio.run(_session_call(env, body))
    assert result.is_error is True
    assert "not today" in result.content[0].text and "did not run" in result.content[0].text
    assert _notes(Path(env["NOTES_FILE"])) == []


def test_a_client_that_timed_out_retries_into_the_same_proposal(
    env: dict[str, str], sqlite_url: str
) -> None:
    async def body(session: ClientSession) -> tuple[Proposal, Any]:
        with pytest.raises(MCPError):  # the client's own request timeout
            await session.call_tool("append_note", {"text": "patient"}, read_timeout_seconds=2)
        first = _pending(sqlite_url)
        assert first is not None
        retry = asyncio.ensure_future(session.call_tool("append_note", {"text": "patient"}))
        await asyncio.sleep(1.5)
        with SQLModelProvider(sqlite_url) as provider:
            assert len(provider.ledger.list(owner=OWNER).items) == 1  # joined, not re-proposed
            provider.ledger.approve(first.proposal_id, "operator@example.com")
        return first, await asyncio.wait_for(retry, 60)

    proposal, result = asyncio.run(_session_call(env, body))
    assert result.structured_content == {"appended": "patient"}
    assert _notes(Path(env["NOTES_FILE"])) == [{"text": "patient", "key": proposal.proposal_id}]


def test_upstream_tool_list_change_invalidates_waiting_calls_and_is_announced(
    env: dict[str, str], sqlite_url: str
) -> None:
    received: list[Any] = []

    async def body(session: ClientSession) -> dict[str, Any]:
        await session.list_tools()
        call = asyncio.ensure_future(session.call_tool("append_note", {"text": "old"}))
        proposal = await asyncio.to_thread(_until, lambda: _pending(sqlite_url), 60, "proposal")
        upgraded = await session.call_tool("upgrade_notes", {})
        assert not upgraded.is_error
        result = await asyncio.wait_for(call, 60)
        await asyncio.to_thread(
            _until, lambda: any(isinstance(m, ToolListChangedNotification) for m in received),
            30, "tools/list_changed from the gateway",
        )  # fmt: skip
        relisted = {tool.name: tool for tool in (await session.list_tools()).tools}
        return {"proposal": proposal, "result": result, "relisted": relisted}

    out = asyncio.run(_session_call(env, body, received))
    assert out["result"].is_error is True
    assert "changed its contract" in out["result"].content[0].text
    assert out["relisted"]["append_note"].input_schema["required"] == ["text", "author"]
    cancelled = _proposal(sqlite_url, out["proposal"].proposal_id)
    assert cancelled.status is ProposalStatus.CANCELLED
    with SQLModelProvider(sqlite_url) as provider:
        (event,) = provider.ledger.trace_events(agent_id=OWNER, kind="tool_schema_changed")
    assert event.tool == "notes__append_note"
    assert event.payload["invalidated_proposals"] == [cancelled.proposal_id]
    assert _notes(Path(env["NOTES_FILE"])) == []


def test_a_2026_07_28_client_gets_progress_and_listen_events(
    env: dict[str, str], sqlite_url: str
) -> None:
    """The same through ``mcp.Client`` on the per-request protocol (no handshake)."""
    command = _gateway_command()
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async def body() -> dict[str, Any]:
        async with Client(params) as client:
            assert client.session.protocol_version in MODERN_PROTOCOL_VERSIONS
            call = asyncio.ensure_future(
                client.call_tool("append_note", {"text": "modern"}, progress_callback=on_progress)
            )
            proposal = await asyncio.to_thread(_until, lambda: _pending(sqlite_url), 60, "proposal")
            await asyncio.to_thread(_until, lambda: messages, 30, "a progress notification")
            with SQLModelProvider(sqlite_url) as provider:
                provider.ledger.approve(proposal.proposal_id, "operator@example.com")
            result = await asyncio.wait_for(call, 60)
            async with client.listen(tools_list_changed=True) as subscription:
                await client.call_tool("upgrade_notes", {})
                event = await asyncio.wait_for(subscription.__anext__(), 30)
            return {"proposal": proposal, "result": result, "event": event}

    out = asyncio.run(body())
    assert messages[0] == f"waiting for approval of {out['proposal'].proposal_id}"
    assert out["result"].structured_content == {"appended": "modern"}
    assert type(out["event"]).__name__ == "ToolsListChanged"
    assert _notes(Path(env["NOTES_FILE"])) == [
        {"text": "modern", "key": out["proposal"].proposal_id}
    ]


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_streamable_http_upstream_is_gated_the_same_way(
    env: dict[str, str], sqlite_url: str, tmp_path: Path
) -> None:
    import socket

    count_file = tmp_path / "orders.jsonl"
    port = _free_port()
    upstream = subprocess.Popen(
        [sys.executable, str(TESTS_DIR / "support" / "mcp_server.py"), "http", str(port)],
        env={**os.environ, "MCP_COUNT_FILE": str(count_file)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def listening() -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    try:
        _until(listening, 60, "the HTTP server")
        assert SUPERVISOR is not None
        params = StdioServerParameters(
            command=SUPERVISOR, env=env,
            args=["mcp-gateway", "--name", "web", "--trust", "trusted",
                  "--url", f"http://127.0.0.1:{port}/mcp"],
        )  # fmt: skip

        def pending() -> Proposal | None:
            with SQLModelProvider(sqlite_url) as provider:
                items = provider.ledger.list(status="pending", owner="mcp-gateway:web").items
            return items[0] if items else None

        async def body() -> tuple[Any, Any, Proposal]:
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                lookup = await session.call_tool("lookup", {"sku": "Z"})
                call = asyncio.ensure_future(
                    session.call_tool("create_order", {"sku": "A-1", "quantity": 2})
                )
                proposal = await asyncio.to_thread(_until, pending, 60, "proposal")
                assert not count_file.exists()
                with SQLModelProvider(sqlite_url) as provider:
                    provider.ledger.approve(proposal.proposal_id, "operator@example.com")
                return lookup, await asyncio.wait_for(call, 60), proposal

        lookup, order, proposal = asyncio.run(body())
    finally:
        upstream.terminate()
        upstream.wait(timeout=30)
    assert lookup.structured_content == {"sku": "Z", "available": 12}
    assert order.structured_content == {"order": "order-A-1-2"}
    (line,) = [json.loads(text) for text in count_file.read_text().splitlines()]
    assert line["key"] == proposal.proposal_id
    assert proposal.execution_target["transport"] == "streamable_http"
    assert proposal.runtime == "mcp:web"


def _inspector(environment: dict[str, str], *tool_args: str) -> subprocess.Popen[str]:
    if not INSPECTOR.exists():
        unavailable("the MCP Inspector is not installed: run `bash .ci/node-deps.sh`")
    forwarded = [f"{key}={environment[key]}" for key in ("SUPERVISOR_DB", "NOTES_FILE")]
    env_flags = [flag for pair in forwarded for flag in ("-e", pair)]
    return subprocess.Popen(
        [str(INSPECTOR), "--cli", "--format", "json", *env_flags, "--method", "tools/call",
         "--tool-name", "append_note", *tool_args, "--", *_gateway_command()],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_mcp_inspector_cli_call_waits_for_approval_and_a_rejection_is_an_error(
    env: dict[str, str], sqlite_url: str
) -> None:
    notes = Path(env["NOTES_FILE"])
    inspector = _inspector(env, "--tool-arg", "text=from-inspector")
    proposal = _until(lambda: _pending(sqlite_url), 60, "the inspector's proposal")
    time.sleep(1.0)
    assert inspector.poll() is None and _notes(notes) == []
    assert run_cli("proposals", "approve", proposal.proposal_id, "--db", sqlite_url).returncode == 0
    out, err = inspector.communicate(timeout=60)
    assert inspector.returncode == 0, err
    result = json.loads(out)["result"]  # the CLI's --format json envelope
    assert result.get("isError") in (None, False), out
    assert result["structuredContent"] == {"appended": "from-inspector"}
    assert _notes(notes) == [{"text": "from-inspector", "key": proposal.proposal_id}]

    rejected = _inspector(env, "--tool-arg", "text=refused")
    second = _until(lambda: _pending(sqlite_url), 60, "the second proposal")
    reject = run_cli(
        "proposals", "reject", second.proposal_id, "--reason", "no", "--db", sqlite_url
    )
    assert reject.returncode == 0, reject.stderr
    out, err = rejected.communicate(timeout=60)
    refusal = json.loads(out).get("result", {}) if out.strip() else {}
    assert refusal.get("isError") is True, (out, err)
    assert "Rejected" in json.dumps(refusal)
    assert len(_notes(notes)) == 1


def _start_gateway(environment: dict[str, str], trust: str = "trusted") -> subprocess.Popen[bytes]:
    """A gateway driven by hand: JSON-RPC lines on its stdin (legacy handshake)."""
    gateway = subprocess.Popen(
        _gateway_command(trust=trust), env=environment, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    _send(gateway, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}})  # fmt: skip
    assert _read(gateway, 0)["result"]["serverInfo"]
    _send(gateway, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return gateway


def _send(gateway: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert gateway.stdin is not None
    gateway.stdin.write(json.dumps(message).encode() + b"\n")
    gateway.stdin.flush()


def _read(gateway: subprocess.Popen[bytes], request_id: int) -> dict[str, Any]:
    assert gateway.stdout is not None
    while True:
        line = gateway.stdout.readline()
        assert line, "the gateway closed its output"
        message: dict[str, Any] = json.loads(line)
        if message.get("id") == request_id:
            return message


def _call(
    gateway: subprocess.Popen[bytes], request_id: int, text: str | None, tool: str = "append_note"
) -> None:
    arguments = {} if text is None else {"text": text}
    _send(gateway, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}})  # fmt: skip


def test_the_ledger_policy_decides_for_an_untrusted_server_without_a_person(
    env: dict[str, str], sqlite_url: str, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rules]]\nname = "reads"\nverdict = "allow"\nreason = "reading is fine"\n'
        'tool = "notes__read_notes"\n\n'
        '[[rules]]\nname = "no shouting"\nverdict = "deny"\nreason = "no capitals"\n'
        'tool = "notes__append_note"\nwhen = "args.text == \'LOUD\'"\n'
    )
    with SQLModelProvider(sqlite_url) as provider:  # create the ledger
        provider.ledger.head()
    applied = run_cli("policy", "apply", str(policy), "--db", sqlite_url)
    assert applied.returncode == 0, applied.stderr
    gateway = _start_gateway(env, trust="untrusted")  # annotations are not believed
    try:
        _call(gateway, 1, None, tool="read_notes")
        read = _read(gateway, 1)["result"]
        _call(gateway, 2, "LOUD")
        denied = _read(gateway, 2)["result"]
    finally:
        gateway.kill()
        gateway.wait(timeout=30)
    assert read["structuredContent"] == {"notes": []}
    assert denied["isError"] is True and "no capitals" in denied["content"][0]["text"]
    assert _notes(Path(env["NOTES_FILE"])) == []
    with SQLModelProvider(sqlite_url) as provider:
        decided = {p.tool_name: p for p in provider.ledger.list(owner=OWNER, limit=50).items}
    assert decided["notes__read_notes"].status is ProposalStatus.EXECUTED
    assert decided["notes__read_notes"].decided_by_rule == "rule:reads"
    assert decided["notes__append_note"].status is ProposalStatus.REJECTED


def test_sigkill_after_approval_before_the_call_ran_then_a_retry_runs_it_once(
    env: dict[str, str], sqlite_url: str
) -> None:
    notes = Path(env["NOTES_FILE"])
    first = _start_gateway(env)
    try:
        _call(first, 1, "once")
        proposal = _until(lambda: _pending(sqlite_url), 60, "proposal")
        _freeze_between_writes(first, sqlite_url)  # frozen: it cannot claim the approval
        assert (
            run_cli("proposals", "approve", proposal.proposal_id, "--db", sqlite_url).returncode
            == 0
        )
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    assert _proposal(sqlite_url, proposal.proposal_id).status is ProposalStatus.APPROVED
    resume = run_cli("resume", proposal.proposal_id, "--db", sqlite_url)  # no agent to re-create
    assert resume.returncode == 2 and "not_resumable" in resume.stderr
    assert "supervisor mcp-gateway" in resume.stderr, resume.stderr
    assert _notes(notes) == []
    second = _start_gateway(env)
    try:
        _call(second, 1, "once")  # the client's retry joins the approved proposal
        answer = _read(second, 1)["result"]
        _call(second, 2, "once")  # and a retry of the retry gets the recorded result
        replay = _read(second, 2)["result"]
    finally:
        second.kill()
        second.wait(timeout=30)
    assert answer["structuredContent"] == {"appended": "once"}
    assert replay["structuredContent"] == {"appended": "once"}
    assert _notes(notes) == [{"text": "once", "key": proposal.proposal_id}]
    assert _proposal(sqlite_url, proposal.proposal_id).status is ProposalStatus.EXECUTED


def test_sigkill_while_the_approved_call_runs_is_never_run_again(
    env: dict[str, str], sqlite_url: str, tmp_path: Path
) -> None:
    notes = Path(env["NOTES_FILE"])
    hold = tmp_path / "hold"
    first = _start_gateway({**env, "NOTES_HOLD_FILE": str(hold)})
    try:
        _call(first, 1, "maybe")
        proposal = _until(lambda: _pending(sqlite_url), 60, "proposal")
        assert (
            run_cli("proposals", "approve", proposal.proposal_id, "--db", sqlite_url).returncode
            == 0
        )
        _until(lambda: Path(f"{hold}.started").exists(), 60, "the upstream call to start")
        assert _proposal(sqlite_url, proposal.proposal_id).status is ProposalStatus.EXECUTING
        os.kill(_gateway_pid(sqlite_url), signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    second = _start_gateway(env)
    try:
        _call(second, 1, "maybe")  # the client retries after the crash
        answer = _read(second, 1)["result"]
    finally:
        second.kill()
        second.wait(timeout=30)
    assert answer["isError"] is True
    assert "not run again" in answer["content"][0]["text"]
    assert len(_notes(notes)) <= 1
    assert _notes(notes) == []  # the upstream died with its gateway before appending
    status = _proposal(sqlite_url, proposal.proposal_id).status
    assert status is ProposalStatus.NEEDS_RECONCILIATION
    with SQLModelProvider(sqlite_url) as provider:
        rows = provider.ledger.list(owner=OWNER, limit=50).items
    assert [p.proposal_id for p in rows] == [proposal.proposal_id]  # no second proposal


def test_install_prints_documented_formats_and_write_merges(tmp_path: Path) -> None:
    server = ["--", "python", "server.py"]
    shapes = {
        "claude-desktop": ("mcpServers", None),
        "claude-code": ("mcpServers", "stdio"),
        "cursor": ("mcpServers", None),
        "vscode": ("servers", "stdio"),
    }
    for client, (key, kind) in shapes.items():
        shown = run_cli("mcp-gateway", "install", client, "--name", "files",
                        "--executable", "/opt/bin/supervisor", *server)  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        entry = json.loads(shown.stdout)[key]["files"]
        assert entry.get("type") == kind
        assert entry["command"] == "/opt/bin/supervisor"
        assert entry["args"] == ["mcp-gateway", "--name", "files", "--", "python", "server.py"]
    config = tmp_path / ".vscode" / "mcp.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"servers": {"other": {"type": "http", "url": "http://x/mcp"}},
                                  "inputs": [{"id": "token"}]}))  # fmt: skip
    write = run_cli("mcp-gateway", "install", "vscode", "--name", "files", "--write",
                    "--path", str(config), "--env", "A=1", *server)  # fmt: skip
    assert write.returncode == 0, write.stderr
    merged = json.loads(config.read_text())
    assert merged["inputs"] == [{"id": "token"}]
    assert merged["servers"]["other"] == {"type": "http", "url": "http://x/mcp"}
    assert merged["servers"]["files"]["env"] == {"A": "1"}
    assert merged["servers"]["files"]["args"][:3] == ["mcp-gateway", "--name", "files"]
    clash = run_cli("mcp-gateway", "install", "vscode", "--name", "other", "--write",
                    "--path", str(config), *server)  # fmt: skip
    assert clash.returncode == 2 and "already has a server named 'other'" in clash.stderr
    assert json.loads(config.read_text()) == merged
    desktop = tmp_path / "claude_desktop_config.json"
    desktop.write_text(json.dumps({"globalShortcut": "Ctrl+Space", "mcpServers": {}}))
    assert run_cli("mcp-gateway", "install", "claude-desktop", "--write", "--path",
                   str(desktop), *server).returncode == 0  # fmt: skip
    written = json.loads(desktop.read_text())
    assert written["globalShortcut"] == "Ctrl+Space"
    assert list(written["mcpServers"]) == ["server"]
