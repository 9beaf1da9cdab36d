"""Load the router relevance dataset as governed tools, and score a ranker on it.

Used by the router tests and by ``bench/bench_router.py``. Each JSON tool becomes a real
:class:`~supervisor.tools.governed.GovernedTool` over a stub function whose signature is built
from the JSON Schema (no ``exec``/``eval``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from supervisor.tools.governed import GovernedTool, governed_tool

HERE = Path(__file__).resolve().parent
TOOLS_FILE = HERE / "toolbox_tools.json"
QUERIES_FILE = HERE / "toolbox_queries.json"

AnyTool = GovernedTool[..., Any]
_JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "boolean": bool, "number": float}


@dataclass(frozen=True)
class LabelledQuery:
    """A query and the names of the tools that answer it."""

    query: str
    relevant: tuple[str, ...]
    kind: str


def load_tool_specs() -> list[dict[str, Any]]:
    """The dataset's tool definitions (JSON)."""
    specs: list[dict[str, Any]] = json.loads(TOOLS_FILE.read_text(encoding="utf-8"))
    return specs


def load_queries() -> list[LabelledQuery]:
    """The dataset's labelled queries."""
    raw: list[dict[str, Any]] = json.loads(QUERIES_FILE.read_text(encoding="utf-8"))
    return [LabelledQuery(item["query"], tuple(item["relevant"]), item["kind"]) for item in raw]


def _annotation(schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return Literal.__getitem__(tuple(schema["enum"]))
    return _JSON_TYPES[schema["type"]]


def _stub(name: str) -> Callable[..., dict[str, Any]]:
    def stub(**arguments: Any) -> dict[str, Any]:
        return {"tool": name, "arguments": arguments}

    return stub


def governed_from_spec(spec: dict[str, Any], *, name: str | None = None) -> AnyTool:
    """A governed tool with the spec's name, description, parameters and domains."""
    tool_name = name or spec["name"]
    properties: dict[str, Any] = spec["parameters"]["properties"]
    function = _stub(tool_name)
    parameters = [
        inspect.Parameter(field, inspect.Parameter.KEYWORD_ONLY, annotation=_annotation(schema))
        for field, schema in properties.items()
    ]
    function.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    function.__annotations__ = {field.name: field.annotation for field in parameters}
    arg_lines = [f"    {field}: {schema['description']}" for field, schema in properties.items()]
    function.__doc__ = spec["description"] + (
        "\n\nArgs:\n" + "\n".join(arg_lines) if arg_lines else ""
    )
    return governed_tool(
        name=tool_name, description=spec["description"], domains=tuple(spec["domains"])
    )(function)


def load_tools() -> list[AnyTool]:
    """Every dataset tool as a governed tool."""
    return [governed_from_spec(spec) for spec in load_tool_specs()]


@dataclass(frozen=True)
class Recall:
    """Mean recall@1 and recall@5 over a query set."""

    at_1: float
    at_5: float
    queries: int


def recall(rank: Callable[[str], Sequence[str]], queries: Iterable[LabelledQuery]) -> Recall:
    """Score a ranker: ``rank(query)`` returns tool names best first.

    recall@k of one query is the share of its relevant tools found in the first k results;
    the result is the mean over queries.
    """
    total_1 = total_5 = 0.0
    count = 0
    for labelled in queries:
        names = list(rank(labelled.query))
        relevant = set(labelled.relevant)
        total_1 += len(relevant.intersection(names[:1])) / len(relevant)
        total_5 += len(relevant.intersection(names[:5])) / len(relevant)
        count += 1
    return Recall(total_1 / count, total_5 / count, count)
