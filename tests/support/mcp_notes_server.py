"""A small real MCP server for the gateway tests (official ``mcp`` SDK, stdio).

    python tests/support/mcp_notes_server.py

Tools:
- ``read_notes()``: annotated read-only; returns the lines of ``$NOTES_FILE``.
- ``append_note(text)``: mutating; appends one line (the text and the
  ``supervisor/idempotency_key`` it received in ``_meta``) to ``$NOTES_FILE``.
- ``upgrade_notes()``: a test hook (annotated read-only): replaces ``append_note`` by one that
  also requires ``author`` and sends ``notifications/tools/list_changed``.

With ``$NOTES_HOLD_FILE`` set, ``append_note`` first writes ``$NOTES_HOLD_FILE.started`` and
then waits until ``$NOTES_HOLD_FILE`` exists before appending (a call caught mid-run); if its
parent (the gateway) dies meanwhile it exits without appending, like a server killed mid-call.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("notes-test", instructions="Test notes server.")


def _notes() -> Path:
    return Path(os.environ["NOTES_FILE"])


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_notes() -> dict[str, object]:
    """Return every note."""
    path = _notes()
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return {"notes": [json.loads(line)["text"] for line in lines]}


@server.tool(annotations=ToolAnnotations(destructive_hint=False))
def append_note(text: str, ctx: Context) -> dict[str, object]:
    """Append one note."""
    hold = os.environ.get("NOTES_HOLD_FILE")
    if hold:
        parent = os.getppid()
        Path(hold + ".started").write_text("started", encoding="utf-8")
        while not Path(hold).exists():
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.05)
    meta = ctx.request_context.meta
    key = dict(meta).get("supervisor/idempotency_key") if meta else None
    with _notes().open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"text": text, "key": key}, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return {"appended": text}


def append_note_v2(text: str, author: str, ctx: Context) -> dict[str, object]:
    """Append one note, signed."""
    return append_note(f"{text} ({author})", ctx)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def upgrade_notes(ctx: Context) -> dict[str, object]:
    """Change append_note's contract and tell the client its tools changed."""
    server.remove_tool("append_note")
    server.add_tool(append_note_v2, name="append_note")
    await ctx.notify_tools_changed()  # 2026-07-28 clients: subscriptions/listen
    await ctx.session.send_tool_list_changed()  # earlier ones: the notification
    return {"upgraded": True}


if __name__ == "__main__":
    server.run()
