"""The assistant turn a tool call belongs to, read from the session's JSONL transcript.

Claude Code appends each assistant message to ``transcript_path`` as a JSON line whose
``message`` has the API message ``id`` and ``content`` blocks; the ``tool_use`` block with the
call's id names the turn. Only the file's tail is read (a long session's transcript is large),
and a line that is not such an entry is skipped: the turn is a grouping hint, never a reason to
refuse a call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: How much of the transcript's end is searched.
TAIL_BYTES = 4 * 1024 * 1024


def _tool_use_ids(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [
        block["id"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "tool_use"
        and isinstance(block.get("id"), str)
    ]


def turn_of(transcript_path: str | None, tool_use_id: str | None) -> str | None:
    """The id of the assistant message whose content has ``tool_use_id``, or ``None``.

    ``None`` when there is no transcript, no id, the file cannot be read, or no assistant
    entry in its last :data:`TAIL_BYTES` holds the call.
    """
    if not transcript_path or not tool_use_id:
        return None
    try:
        with Path(transcript_path).open("rb") as transcript:
            transcript.seek(0, 2)
            size = transcript.tell()
            transcript.seek(max(0, size - TAIL_BYTES))
            tail = transcript.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        if tool_use_id.encode() not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        turn = message.get("id")
        if isinstance(turn, str) and tool_use_id in _tool_use_ids(message):
            return turn[:200]
    return None
