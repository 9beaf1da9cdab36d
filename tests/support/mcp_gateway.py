"""What the MCP gateway's end-to-end tests share: the notes server they put behind it, the
owner of its proposals, the notes it wrote and a bounded wait."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TESTS_DIR = Path(__file__).resolve().parents[1]
NOTES_SERVER = str(TESTS_DIR / "support" / "mcp_notes_server.py")
#: The owner (agent id) of the gateway's proposals for the notes server.
OWNER = "mcp-gateway:notes"


def notes(path: Path) -> list[dict[str, Any]]:
    """The notes the server appended (one JSON object a line), none if it wrote nothing."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def until(condition: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """The first truthy value of ``condition()``, polled every 0.1 s for ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
