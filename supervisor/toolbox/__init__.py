"""Progressive disclosure: a toolbox of governed tools behind stable handles and a router.

The runtime sends, each turn, the two meta-tools (:func:`meta_tool_definitions`) plus the
strict schemas of :meth:`Toolbox.select`'s top-k; ``discover_tools`` calls go to
:meth:`Toolbox.discover`, ``invoke_tool`` calls to :meth:`Toolbox.resolve_handle` and then the
governed pipeline. ``Toolbox(..., embedder=default_embedder())`` adds the bundled embedding
model of ``agent-supervisor[semantic]`` to the lexical ranker.
"""

from __future__ import annotations

from supervisor.toolbox.embedding import Embedder, EmbeddingIndex, Fusion, reciprocal_rank_fusion
from supervisor.toolbox.errors import (
    InvalidInvocation,
    ReservedToolName,
    ToolboxError,
    ToolOutOfScope,
    UnknownToolHandle,
)
from supervisor.toolbox.lexical import DEFAULT_SYNONYMS, LexicalIndex
from supervisor.toolbox.meta import (
    DISCOVER_TOOL_NAME,
    INVOKE_TOOL_NAME,
    MAX_DISCOVER_LIMIT,
    META_TOOL_NAMES,
    Discovery,
    Invocation,
    meta_tool_definitions,
    parse_discovery,
    parse_invocation,
)
from supervisor.toolbox.registry_rows import tool_handle
from supervisor.toolbox.selection import RankedTool, Selection
from supervisor.toolbox.semantic import MiniLMEmbedder, SemanticExtraMissing, default_embedder
from supervisor.toolbox.text import stem, tokenize
from supervisor.toolbox.toolbox import Toolbox, ToolEntry

__all__ = [
    "DEFAULT_SYNONYMS",
    "DISCOVER_TOOL_NAME",
    "INVOKE_TOOL_NAME",
    "MAX_DISCOVER_LIMIT",
    "META_TOOL_NAMES",
    "Discovery",
    "Embedder",
    "EmbeddingIndex",
    "Fusion",
    "InvalidInvocation",
    "Invocation",
    "LexicalIndex",
    "MiniLMEmbedder",
    "RankedTool",
    "ReservedToolName",
    "Selection",
    "SemanticExtraMissing",
    "ToolEntry",
    "ToolOutOfScope",
    "Toolbox",
    "ToolboxError",
    "UnknownToolHandle",
    "default_embedder",
    "meta_tool_definitions",
    "parse_discovery",
    "parse_invocation",
    "reciprocal_rank_fusion",
    "stem",
    "tokenize",
    "tool_handle",
]
