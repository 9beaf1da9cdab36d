"""What the engine does to one model turn's tool calls before it resolves any of them.

Unique call ids: the chat-completions protocol wants every ``tool_call`` id of an assistant
message to be unique and answered by exactly one tool message, and the runtime keys proposals,
checkpointed calls and answers by that id. A model that repeats an id (or sends an empty or
overlong one) has it re-keyed here, deterministically: the first use of an id keeps it, each
later use becomes ``<id>~<n>`` (``n`` = 2, 3, ...; skipping any id the model used itself), and
an empty or overlong id is first replaced by ``call_`` + 16 hex digits of its SHA-256. The
history keeps the re-keyed assistant message, so the transcript the model sees next is
consistent: every id once in the assistant message, answered once, each call with its own
arguments and, if it needs approval, its own proposal.

The per-turn cap: calls beyond ``ContextPolicy.max_tool_calls_per_turn`` do not run and are not
traced one by one. The first of them is answered with one refusal that says how many calls were
cut; every later one gets only :data:`OVER_CAP_ANSWER` (the protocol needs an answer per id).
"""

from __future__ import annotations

import dataclasses
import hashlib

from supervisor.errors import model_error
from supervisor.runtime.llm import AssistantTurn, ModelToolCall, json_text

#: Call ids longer than this are re-keyed (the ledger stores call ids in 200 characters).
MAX_CALL_ID_CHARS = 128
#: What each over-cap call after the first is answered with: the code, nothing else.
OVER_CAP_ANSWER = json_text(model_error("tool_call_limit"))


def _base_id(call_id: str) -> str:
    if call_id and len(call_id) <= MAX_CALL_ID_CHARS:
        return call_id
    return "call_" + hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def unique_call_ids(turn: AssistantTurn) -> tuple[AssistantTurn, dict[str, str]]:
    """The turn with every tool-call id unique, and ``{new id: model's id}`` for re-keyed ones.

    Args:
        turn: The model's turn as received.

    Returns:
        The same turn object when nothing needed re-keying, else a copy with re-keyed calls.
    """
    sent = {call.call_id for call in turn.tool_calls}
    if len(sent) == len(turn.tool_calls) and all(_base_id(call_id) == call_id for call_id in sent):
        return turn, {}
    taken: set[str] = set()
    calls: list[ModelToolCall] = []
    renamed: dict[str, str] = {}
    for call in turn.tool_calls:
        base = _base_id(call.call_id)
        new_id, suffix = base, 1
        while new_id in taken or (new_id != call.call_id and new_id in sent):
            suffix += 1
            new_id = f"{base}~{suffix}"
        taken.add(new_id)
        if new_id != call.call_id:
            renamed[new_id] = call.call_id
            call = dataclasses.replace(call, call_id=new_id)
        calls.append(call)
    return dataclasses.replace(turn, tool_calls=tuple(calls)), renamed


def over_cap_message(cap: int, refused: int) -> str:
    """The one sentence the model gets for the calls over the per-turn cap."""
    return (
        f"At most {cap} tool calls run per turn; this call and the {refused - 1} after it "
        f"({refused} in all) did not run. Make fewer calls per turn."
    )
