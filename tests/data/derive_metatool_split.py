"""Derive the semantic-routing dev/test split from the public MetaTool benchmark.

MetaTool (Huang et al., ICLR 2024; github.com/HowieHwong/MetaTool, MIT licence) asks which of
199 ChatGPT plugins answers a user query. Run, with a checkout of that repository::

    python tests/data/derive_metatool_split.py /path/to/MetaTool

It reads ``dataset/plugin_des.json`` (the 199 tools and their one-line descriptions) and
``dataset/data/all_clean_data.csv`` (20,614 single-tool queries), and writes
``metatool_tools.json`` and ``metatool_queries.json`` beside this file: per tool, in a fixed
shuffle (``random.Random(SEED)``), the first ``DEV_PER_TOOL`` queries go to ``dev`` and the next
``TEST_PER_TOOL`` to ``test``. No query text is edited; exact duplicates are dropped first.
"""

from __future__ import annotations

import csv
import json
import random
import re
import sys
from pathlib import Path

SEED = 17
DEV_PER_TOOL = 2
TEST_PER_TOOL = 3
HERE = Path(__file__).resolve().parent


def python_name(name: str) -> str:
    """A tool name as an identifier (one MetaTool name, ``PDF&URLTool``, has an ``&``)."""
    return re.sub(r"\W", "_", name)


def main(checkout: Path) -> None:
    descriptions: dict[str, str] = json.loads(
        (checkout / "dataset" / "plugin_des.json").read_text(encoding="utf-8")
    )
    by_tool: dict[str, list[str]] = {name: [] for name in descriptions}
    seen: set[str] = set()
    with (checkout / "dataset" / "data" / "all_clean_data.csv").open(encoding="utf-8") as file:
        for row in csv.DictReader(file):
            query, tool = row["Query"].strip(), row["Tool"].strip()
            if tool in by_tool and query and query not in seen:
                seen.add(query)
                by_tool[tool].append(query)
    rng = random.Random(SEED)
    queries: list[dict[str, object]] = []
    for tool in sorted(by_tool):
        candidates = sorted(by_tool[tool])
        rng.shuffle(candidates)
        for index, query in enumerate(candidates[: DEV_PER_TOOL + TEST_PER_TOOL]):
            split = "dev" if index < DEV_PER_TOOL else "test"
            queries.append({"split": split, "query": query, "relevant": [python_name(tool)]})
    tools = [
        {"name": python_name(name), "description": description.strip()}
        for name, description in sorted(descriptions.items())
    ]
    (HERE / "metatool_tools.json").write_text(
        "[\n" + ",\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools) + "\n]\n",
        encoding="utf-8",
    )
    (HERE / "metatool_queries.json").write_text(
        "[\n" + ",\n".join(json.dumps(item, ensure_ascii=False) for item in queries) + "\n]\n",
        encoding="utf-8",
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
