"""Client configuration entries for ``supervisor mcp-gateway install`` and default names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supervisor.cli.mcp_gateway import default_name
from supervisor.mcp.client_config import (
    ClientConfigError,
    client_entry,
    gateway_args,
    merge_entry,
    snippet,
)


def test_default_name_skips_launchers_and_sanitises() -> None:
    assert default_name(("python", "tests/support/notes_server.py"), None) == "notes-server"
    assert default_name(("npx", "-y", "@modelcontextprotocol/server-filesystem", "."), None) == (
        "server-filesystem"
    )
    assert default_name(("/usr/bin/my_tool",), None) == "my-tool"
    assert default_name((), "https://mcp.example.com/mcp") == "mcp-example-com"


def test_entries_follow_each_clients_documented_shape() -> None:
    args = gateway_args("files", command=("python", "s.py"), trust="trusted", db_url="sqlite:///x")
    assert args == ["mcp-gateway", "--name", "files", "--trust", "trusted", "--db", "sqlite:///x",
                    "--", "python", "s.py"]  # fmt: skip
    assert gateway_args("web", url="https://h/mcp") == [
        "mcp-gateway", "--name", "web", "--url", "https://h/mcp",
    ]  # fmt: skip
    desktop = snippet("claude-desktop", "files", client_entry("claude-desktop", "/s", args))
    assert desktop == {"mcpServers": {"files": {"command": "/s", "args": args}}}
    vscode = snippet("vscode", "files", client_entry("vscode", "/s", args, {"K": "v"}))
    assert vscode == {
        "servers": {"files": {"type": "stdio", "command": "/s", "args": args, "env": {"K": "v"}}}
    }
    assert "type" in client_entry("claude-code", "/s", args)
    assert "type" not in client_entry("cursor", "/s", args)


def test_merge_keeps_other_keys_and_refuses_what_it_cannot_merge(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "mcp.json"
    entry = client_entry("cursor", "/s", ["mcp-gateway"])
    assert merge_entry(path, "cursor", "a", entry) == "added"
    assert merge_entry(path, "cursor", "a", entry) == "unchanged"
    other = client_entry("cursor", "/t", ["x"])
    with pytest.raises(ClientConfigError):
        merge_entry(path, "cursor", "a", other)
    assert merge_entry(path, "cursor", "a", other, force=True) == "updated"
    assert json.loads(path.read_text()) == {"mcpServers": {"a": other}}
    commented = tmp_path / "commented.json"
    commented.write_text('{ // a comment\n "servers": {} }')
    with pytest.raises(ClientConfigError) as refused:
        merge_entry(commented, "vscode", "a", entry)
    assert refused.value.code == "mcp_client_config"
    assert commented.read_text() == '{ // a comment\n "servers": {} }'
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"servers": []}')
    with pytest.raises(ClientConfigError):
        merge_entry(wrong, "vscode", "a", entry)
