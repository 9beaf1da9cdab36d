"""Load the MetaTool-derived semantic-routing split as governed tools (see README.md here).

``metatool_tools.json`` holds 199 tools (name, one-line description); each becomes a governed
tool with one ``request: str`` parameter. ``metatool_queries.json`` holds labelled queries, each
in the ``dev`` split (tuning) or the ``test`` split (reported figures only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from toolbox_dataset import AnyTool, LabelledQuery, governed_from_spec

HERE = Path(__file__).resolve().parent
TOOLS_FILE = HERE / "metatool_tools.json"
QUERIES_FILE = HERE / "metatool_queries.json"

Split = Literal["dev", "test"]


def load_metatool_specs() -> list[dict[str, Any]]:
    """The 199 tools as specs for :func:`toolbox_dataset.governed_from_spec`."""
    raw: list[dict[str, str]] = json.loads(TOOLS_FILE.read_text(encoding="utf-8"))
    return [
        {
            "name": item["name"],
            "description": item["description"],
            "domains": [],
            "parameters": {
                "properties": {
                    "request": {"type": "string", "description": "What the user asks for."}
                }
            },
        }
        for item in raw
    ]


def load_metatool_tools() -> list[AnyTool]:
    """The 199 tools as governed tools."""
    return [governed_from_spec(spec) for spec in load_metatool_specs()]


def load_metatool_queries(split: Split) -> list[LabelledQuery]:
    """The labelled queries of one split."""
    raw: list[dict[str, Any]] = json.loads(QUERIES_FILE.read_text(encoding="utf-8"))
    return [
        LabelledQuery(item["query"], tuple(item["relevant"]), f"metatool-{split}")
        for item in raw
        if item["split"] == split
    ]
