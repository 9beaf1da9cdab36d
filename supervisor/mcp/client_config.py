"""MCP client configuration entries that launch a server through ``supervisor mcp-gateway``.

Each supported client documents a JSON file with a map of named servers:

==============  ===========================================  =============  ==================
client          file                                          map key        entry
==============  ===========================================  =============  ==================
claude-desktop  ``claude_desktop_config.json`` (per OS)      ``mcpServers``  command/args/env
claude-code     ``.mcp.json`` (project)                       ``mcpServers``  type stdio + ...
cursor          ``.cursor/mcp.json`` (project)                ``mcpServers``  command/args/env
vscode          ``.vscode/mcp.json`` (workspace)              ``servers``     type stdio + ...
==============  ===========================================  =============  ==================

:func:`merge_entry` adds one entry and leaves every other key of the file as it was.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from supervisor.errors import SupervisorError

ClientName = Literal["claude-desktop", "claude-code", "cursor", "vscode"]
CLIENTS: tuple[ClientName, ...] = ("claude-desktop", "claude-code", "cursor", "vscode")


class ClientConfigError(SupervisorError, ValueError):
    """A client's configuration file cannot be merged into (not JSON, or the name is taken)."""

    code = "mcp_client_config"


@dataclass(frozen=True)
class ClientFormat:
    """Where a client keeps its MCP servers and how it writes one."""

    servers_key: str
    typed: bool


FORMATS: dict[ClientName, ClientFormat] = {
    "claude-desktop": ClientFormat("mcpServers", typed=False),
    "claude-code": ClientFormat("mcpServers", typed=True),
    "cursor": ClientFormat("mcpServers", typed=False),
    "vscode": ClientFormat("servers", typed=True),
}


def default_path(client: ClientName, *, cwd: Path | None = None) -> Path:
    """The file the client reads: per OS for Claude Desktop, in the project for the others."""
    here = cwd or Path.cwd()
    match client:
        case "claude-desktop":
            if sys.platform == "darwin":
                base = Path.home() / "Library" / "Application Support"
            elif sys.platform == "win32":
                base = Path(os.environ.get("APPDATA", Path.home() / "AppData" / "Roaming"))
            else:
                base = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
            return base / "Claude" / "claude_desktop_config.json"
        case "claude-code":
            return here / ".mcp.json"
        case "cursor":
            return here / ".cursor" / "mcp.json"
        case "vscode":
            return here / ".vscode" / "mcp.json"


def gateway_args(
    name: str, *, command: tuple[str, ...] = (), url: str | None = None,
    trust: str = "untrusted", db_url: str | None = None,
) -> list[str]:  # fmt: skip
    """The arguments of ``supervisor`` that put the server behind the gateway."""
    args = ["mcp-gateway", "--name", name]
    if trust != "untrusted":
        args += ["--trust", trust]
    if db_url:
        args += ["--db", db_url]
    if url is not None:
        return [*args, "--url", url]
    return [*args, "--", *command]


def client_entry(
    client: ClientName, executable: str, args: list[str], env: dict[str, str] | None = None
) -> dict[str, Any]:
    """One server entry in the client's documented shape."""
    entry: dict[str, Any] = {"type": "stdio"} if FORMATS[client].typed else {}
    entry.update(command=executable, args=list(args))
    if env:
        entry["env"] = dict(env)
    return entry


def snippet(client: ClientName, name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The smallest file content holding the entry (what ``install`` prints)."""
    return {FORMATS[client].servers_key: {name: entry}}


def merge_entry(
    path: Path, client: ClientName, name: str, entry: dict[str, Any], *, force: bool = False
) -> Literal["added", "updated", "unchanged"]:
    """Add ``entry`` as ``name`` to the client's file, keeping every other key as it was.

    The file is created (with its folder) when missing and replaced atomically.

    Raises:
        ClientConfigError: the file is not a JSON object, its server map is not an object, or
            another entry already has ``name`` (without ``force``).
    """
    key = FORMATS[client].servers_key
    document: dict[str, Any] = {}
    if path.exists():
        text = path.read_text(encoding="utf-8")
        try:
            loaded = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            raise ClientConfigError(
                f"{path} is not plain JSON ({exc.msg} at line {exc.lineno}); it was not changed.",
                hint="Remove comments or trailing commas, or add the printed entry by hand.",
            ) from None
        if not isinstance(loaded, dict):
            raise ClientConfigError(f"{path} does not hold a JSON object; it was not changed.")
        document = loaded
    servers = document.setdefault(key, {})
    if not isinstance(servers, dict):
        raise ClientConfigError(f'"{key}" in {path} is not an object; it was not changed.')
    existing = servers.get(name)
    if existing == entry:
        return "unchanged"
    if existing is not None and not force:
        raise ClientConfigError(
            f"{path} already has a server named {name!r}; it was not changed.",
            hint="Pick another --name, or pass --force to replace that entry.",
        )
    servers[name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return "added" if existing is None else "updated"
