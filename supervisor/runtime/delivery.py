"""What the model receives for one tool result: inline, a pointer, or a size refusal.

Every result passes here before it reaches the model or a checkpoint. A result whose JSON text
is longer than ``ContextPolicy.max_result_chars`` never goes out whole: with offloading
configured it is stored and the model gets a pointer (whatever ``offload_above_chars`` says);
without, the model gets a ``result_too_large`` error instead and the outcome says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from supervisor.tools.dispatch import ToolCallResult, error_result
from supervisor.tools.errors import ToolCallError

if TYPE_CHECKING:
    from supervisor.runtime.offload import ResultOffloader


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivered result.

    Attributes:
        content: The tool message text for the model.
        blob_ref: ``sha256:<hex>`` of the stored result when it was offloaded, else None.
        result: The call's result as the model experienced it: the tool's own, or a
            ``result_too_large`` error result when it was refused for its size.
    """

    content: str
    blob_ref: str | None
    result: ToolCallResult


def deliver_result(
    tool_name: str,
    call_id: str,
    result: ToolCallResult,
    *,
    offloader: ResultOffloader | None,
    max_chars: int,
) -> Delivery:
    """Decide what the model receives for ``result`` (see the module docstring)."""
    content = result.model_content()
    too_large = len(content) > max_chars
    if offloader is not None:
        decision = offloader.offload(tool_name, call_id, content, force=too_large)
        if decision.offloaded or not too_large:
            return Delivery(decision.model_content, decision.digest, result)
    if not too_large:
        return Delivery(content, None, result)
    error = ToolCallError(
        "result_too_large",
        f"{tool_name} returned {len(content):,} characters of JSON; at most {max_chars:,} "
        "reach the model, so the result was not delivered. Ask for less (a filter, a page, "
        "fewer fields).",
        tool_name,
        detail=f"{len(content)} characters > max_result_chars={max_chars}",
    )
    refused = error_result(tool_name, error)
    return Delivery(refused.model_content(), None, refused)
