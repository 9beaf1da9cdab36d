"""What the router reveals in one turn, and its trace form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from supervisor.tools.contract import Tool

#: Characters of the query kept in a trace (the full query is in the conversation itself).
TRACE_QUERY_CHARS = 200


@dataclass(frozen=True)
class RankedTool:
    """One revealed tool.

    Attributes:
        tool: The live governed tool.
        handle: Its stable handle.
        score: Ranking score (BM25, or fused RRF score); 0.0 for an always-visible tool that was
            not ranked.
        source: ``ranked`` (top-k) or ``always_visible`` (revealed by policy).
    """

    tool: Tool
    handle: str
    score: float
    source: Literal["ranked", "always_visible"] = "ranked"

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.tool.name


@dataclass(frozen=True)
class Selection:
    """The tools revealed for one query: the ranked top-k plus in-scope always-visible tools.

    Attributes:
        query: The text that was ranked against.
        ranked: At most ``top_k`` tools, best first (ties broken by handle).
        always_visible: Policy's always-visible tools that are in scope and not already ranked.
        top_k: The policy's ``tool_top_k``.
        backend: ``lexical`` or ``lexical+embedding``.
    """

    query: str
    ranked: tuple[RankedTool, ...]
    always_visible: tuple[RankedTool, ...]
    top_k: int
    backend: str = "lexical"

    @property
    def revealed(self) -> tuple[RankedTool, ...]:
        """Ranked tools first, then always-visible ones."""
        return self.ranked + self.always_visible

    @property
    def tools(self) -> list[Tool]:
        """The revealed governed tools, in order."""
        return [entry.tool for entry in self.revealed]

    @property
    def handles(self) -> list[str]:
        """The revealed handles, in order."""
        return [entry.handle for entry in self.revealed]

    def openai_definitions(self) -> list[dict[str, Any]]:
        """The revealed tools' OpenAI function definitions (strict where expressible)."""
        return [entry.tool.openai.definition for entry in self.revealed]

    def trace(self) -> dict[str, Any]:
        """A JSON-ready record of what was revealed and why, for a trace event."""
        return {
            "query": self.query[:TRACE_QUERY_CHARS],
            "query_truncated": len(self.query) > TRACE_QUERY_CHARS,
            "backend": self.backend,
            "top_k": self.top_k,
            "revealed": [
                {
                    "rank": position,
                    "handle": entry.handle,
                    "name": entry.name,
                    "score": entry.score,
                    "source": entry.source,
                }
                for position, entry in enumerate(self.revealed, start=1)
            ],
        }
