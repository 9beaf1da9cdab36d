"""Search text of a tool and the tokeniser the lexical ranker uses.

Tokenising is deliberately simple and fully deterministic:

1. identifiers are split on ``snake_case``, ``kebab-case``, ``dot.case`` and ``camelCase``
   boundaries (``getHTTPStatus`` -> ``get http status``; ``PRs`` -> ``PR``), then lower-cased;
2. tokens are runs of letters or digits; a small English stop-word list is dropped;
3. light stemming, in this order: ``ies`` -> ``y``; ``sses`` -> ``ss``; ``es`` after
   s/x/z/ch/sh is removed; a final ``s`` is removed unless it follows s, u or i
   (``status``, ``analysis``); ``ing`` and ``ed`` are removed and a doubled final consonant
   other than l, s or z is undoubled (``shipping`` -> ``ship``); a final ``e`` is removed. Every
   rule needs the remaining stem to keep at least three letters.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from supervisor.tools.contract import Tool
from supervisor.tools.docstrings import parse_docstring
from supervisor.tools.governed import GovernedTool

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_ACRONYM_PLURAL = re.compile(r"([A-Z]{2,})s\b")
_TOKEN = re.compile(r"[A-Za-z]+|[0-9]+")

#: Words too common in requests and tool descriptions to tell tools apart.
STOP_WORDS = frozenset(
    """a about an and any are as at be by can could do does for from give has have how i in
    into is it its me my need of on one or our please should so some than that the their them
    then there these this those to up us use using via want was we what when where which who
    will with would you your""".split()
)

#: Field weights: a term in the name counts three times one in the description.
NAME_WEIGHT = 3.0
DOMAIN_WEIGHT = 2.0
DESCRIPTION_WEIGHT = 1.0
PARAMETER_WEIGHT = 1.0
AUGMENT_WEIGHT = 0.5

_UNDOUBLE_EXCEPT = frozenset("lsz")


def split_identifier(text: str) -> str:
    """Split camelCase boundaries and separators so each word stands alone."""
    text = _ACRONYM_PLURAL.sub(r"\1", text)
    return _CAMEL.sub(" ", text).replace("_", " ").replace("-", " ").replace(".", " ")


def stem(word: str) -> str:
    """Light suffix stripping (see the module docstring); ``word`` must be lower case."""
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")) and len(word) > 4:
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in _UNDOUBLE_EXCEPT:
                word = word[:-1]
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Split, lower-case, drop stop words and stem ``text``.

    Args:
        text: Free text or identifiers.

    Returns:
        The stemmed tokens in text order (repeats kept).
    """
    tokens: list[str] = []
    for raw in _TOKEN.findall(split_identifier(text)):
        word = raw.lower()
        if word in STOP_WORDS or (len(word) == 1 and not word.isdigit()):
            continue
        tokens.append(stem(word))
    return tokens


@dataclass(frozen=True)
class SearchText:
    """The text fields of one tool that the ranker indexes, each with its weight."""

    name: str
    description: str
    parameters: str
    domains: str
    augmented: str = ""

    def weighted_terms(self) -> dict[str, float]:
        """Term -> weighted frequency over all fields."""
        weights: dict[str, float] = {}
        fields = (
            (self.name, NAME_WEIGHT),
            (self.domains, DOMAIN_WEIGHT),
            (self.description, DESCRIPTION_WEIGHT),
            (self.parameters, PARAMETER_WEIGHT),
            (self.augmented, AUGMENT_WEIGHT),
        )
        for text, weight in fields:
            for term in tokenize(text):
                weights[term] = weights.get(term, 0.0) + weight
        return weights

    def as_document(self) -> str:
        """All fields as one plain text (what an embedding backend embeds)."""
        parts = (split_identifier(self.name), self.description, self.parameters, self.domains)
        return " ".join(part for part in (*parts, self.augmented) if part)


def _schema_words(schema: dict[str, Any], seen: set[int]) -> Iterator[str]:
    """Property names, descriptions and enum values anywhere in a JSON Schema."""
    if id(schema) in seen:
        return
    seen.add(id(schema))
    for prop_name, prop in schema.get("properties", {}).items():
        yield str(prop_name)
        if isinstance(prop, dict):
            yield from _schema_words(prop, seen)
    description = schema.get("description")
    if isinstance(description, str):
        yield description
    for value in schema.get("enum", []):
        if isinstance(value, str):
            yield value
    const = schema.get("const")
    if isinstance(const, str):
        yield const
    for key in ("$defs", "definitions"):
        for child in schema.get(key, {}).values():
            if isinstance(child, dict):
                yield from _schema_words(child, seen)
    for key in ("items", "additionalProperties"):
        child = schema.get(key)
        if isinstance(child, dict):
            yield from _schema_words(child, seen)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for child in schema.get(key, []):
            if isinstance(child, dict):
                yield from _schema_words(child, seen)


def schema_text(parameters: dict[str, Any]) -> str:
    """Everything searchable in a parameters schema, as one text."""
    return " ".join(_schema_words(parameters, set()))


def augmented_text(tool: Tool) -> str:
    """Extra search text derived without a model: the docstring beyond its summary.

    Only a Python function has a docstring; any other tool (an MCP server's) adds nothing.
    """
    doc = (tool.function.__doc__ if isinstance(tool, GovernedTool) else None) or ""
    parsed = parse_docstring(doc)
    rest = doc.replace(parsed.summary, "", 1) if parsed.summary else doc
    return " ".join(rest.split())


def search_text(tool: Tool, *, augment: bool = False) -> SearchText:
    """The indexed fields of ``tool``.

    Args:
        tool: A governed tool.
        augment: Also index the full docstring (no model is asked).

    Returns:
        The tool's :class:`SearchText`.
    """
    return SearchText(
        name=tool.name,
        description=tool.description,
        parameters=schema_text(tool.parameters),
        domains=" ".join(tool.policy.domains),
        augmented=augmented_text(tool) if augment else "",
    )
