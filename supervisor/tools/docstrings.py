"""Google-style docstring parsing: the summary and the per-argument descriptions."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?):\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True)
class ParsedDocstring:
    """What a tool's docstring tells the model: a summary and argument descriptions."""

    summary: str
    arguments: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Parse a Google-style docstring.

    The summary is the text before the first section header. Argument descriptions come from the
    ``Args:`` section; continuation lines indented deeper than the argument line are joined.

    Args:
        doc: The raw docstring, or None.

    Returns:
        The summary (paragraphs joined with a blank line) and a name -> description mapping.
    """
    if not doc:
        return ParsedDocstring(summary="")
    lines = inspect.cleandoc(doc).splitlines()
    summary_lines: list[str] = []
    arguments: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent = 0
    for line in lines:
        header = _SECTION.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if header:
            section = header.group(1)
            current = None
            continue
        if section is None:
            summary_lines.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters") or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(line.strip())
        if match and (current is None or indent <= arg_indent):
            current = match.group(1).lstrip("*")
            arg_indent = indent
            arguments[current] = match.group(3).strip()
        elif current is not None:
            arguments[current] = f"{arguments[current]} {line.strip()}".strip()
    summary = "\n".join(summary_lines).strip()
    summary = re.sub(r"\n{3,}", "\n\n", summary)
    return ParsedDocstring(summary=summary, arguments=arguments)
