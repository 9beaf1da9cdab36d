"""A human's edit of a browser action: the parameters it stands for, refusals, the note.

An edited browser proposal runs only as what it says, on the page as it is now: its arguments
are turned back into the action's parameters (:func:`edited_action_params`), resolved again
and judged by the policy again; the gate runs it only when that resolves to exactly the
approved hash. Otherwise it is refused with one of the typed codes below, and nothing runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sandboxes.browser.targets import ResolvedAction
from supervisor.canonical import canonical_json
from supervisor.ledger.chain import ProposalReader, earlier_links, edit_note
from supervisor.ledger.models import Proposal

EDIT_NOT_ALLOWED = "edited_target_not_allowed"
"""Refusal code: a human's edit points the action somewhere the policy denies."""
EDIT_MISMATCH = "edited_target_mismatch"
"""Refusal code: the edited action, resolved on the page now, is not what was approved."""
EDIT_UNREADABLE = "edited_arguments_invalid"
"""Refusal code: the edited arguments are not parameters of the action."""


@dataclass(frozen=True)
class EditRefusal:
    """Why an approved edit of a browser action does not run (``code`` is one of the above)."""

    code: str
    reason: str
    resolved: ResolvedAction | None = None


def edited_action_params(arguments: dict[str, Any], sent: dict[str, Any]) -> dict[str, Any] | None:
    """The action parameters an edited proposal stands for.

    The proposal's arguments are the action's parameters plus what the gate derived from them
    (``target_url`` / ``target_origin`` of a navigation) and masked stand-ins for typed
    passwords. The derived fields are dropped (resolving again derives them from the edited
    parameters, and the hash comparison then shows whether the edit was consistent); a masked
    value stands for the text the model sent, so it is put back, and it still matches only when
    the edit left it as it was.

    Returns:
        The parameters, or ``None`` when a masked value has no text it can stand for.
    """
    params: dict[str, Any] = {}
    for key, value in arguments.items():
        if key in ("target_url", "target_origin"):
            continue
        if isinstance(value, dict) and value.get("masked") is True:
            if not isinstance(sent.get(key), str):
                return None
            value = sent[key]
        params[key] = value
    return params


def with_edit_note(ledger: ProposalReader, decided: Proposal, result: Any) -> Any:
    """``result`` (an ``ActionResult``) with the edit told to the agent: what the human changed,
    as JSON text after the action's own words (never markup)."""
    earlier = earlier_links(ledger, decided)
    proposed = earlier[0].arguments if earlier else {}
    note = canonical_json(
        {"edited_by_human": edit_note(proposed, decided.arguments, edits=len(earlier))}
    )
    # browser-use shows the agent an action's long_term_memory, else its extracted_content.
    field = "long_term_memory" if getattr(result, "long_term_memory", None) else "extracted_content"
    content = getattr(result, field, None)
    text = f"{content}\n{note}" if content else note
    return result.model_copy(update={field: text})
