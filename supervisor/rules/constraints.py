"""What a suggested rule keeps of one argument (or target key): exact, a range, a prefix, a shape.

Each constraint is learnt from the values humans approved, accepts a value the way its CEL
condition does, and can be narrowed to exclude one value (a call a human rejected) while
keeping as many approved values as possible. Only shapes that are safe to widen are widened:

* a number becomes the range of approved numbers;
* an absolute path becomes the directories (two levels deep or more) that held at least two
  approved paths, never with ``..``;
* a URL becomes the origins (``https://host/``) of at least two approved URLs;
* an identifier (``A-1042``: letters, digits, ``-_.:``, each with a digit, three or more
  distinct values and none a quarter of them) becomes its character shape
  (``^[A-Z]+-[0-9]+$``);
* anything else (a shell command, free text, a nested value) stays exact: one of the values
  approved at least twice (the ``MAX_VALUES`` most frequent).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from supervisor.canonical import canonical_json
from supervisor.rules.literals import cel_literal

#: At most this many exact values in one rule (a longer list is not reviewable).
MAX_VALUES = 50
_ID_CHARS = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_SHAPE_CLASSES = {"A": "[A-Z]+", "a": "[a-z]+", "9": "[0-9]+"}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text(value: Any) -> str:
    return canonical_json(value)


@dataclass(frozen=True)
class OneOf:
    """One of these exact values (their canonical JSON)."""

    values: tuple[str, ...]

    def accepts(self, value: Any) -> bool:
        return _text(value) in self.values

    def cel(self, field: str) -> str:
        literals = [cel_literal(json.loads(text)) for text in self.values]
        if len(literals) == 1:
            return f"{field} == {literals[0]}"
        return f"{field} in [{', '.join(literals)}]"

    def narrowed(self, value: Any) -> list[Constraint]:
        rest = tuple(text for text in self.values if text != _text(value))
        return [OneOf(rest)] if rest else []

    def describe(self) -> str:
        return "exact" if len(self.values) == 1 else f"one of {len(self.values)} values"


@dataclass(frozen=True)
class Range:
    """A number between ``low`` and ``high`` (inclusive unless the bound is open)."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def accepts(self, value: Any) -> bool:
        if not _number(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return bool(above and below)

    def cel(self, field: str) -> str:
        low = f"{field} {'>' if self.low_open else '>='} {cel_literal(self.low)}"
        high = f"{field} {'<' if self.high_open else '<='} {cel_literal(self.high)}"
        return f"{low} && {high}"

    def narrowed(self, value: Any) -> list[Constraint]:
        if not self.accepts(value):
            return [self]
        return [Range(self.low, value, self.low_open, True),
                Range(value, self.high, True, self.high_open)]  # fmt: skip

    def describe(self) -> str:
        low, high = ("(" if self.low_open else "["), (")" if self.high_open else "]")
        return f"number in {low}{self.low}, {self.high}{high}"


@dataclass(frozen=True)
class Prefixes:
    """A string starting with one of these prefixes (directories or URL origins)."""

    prefixes: tuple[str, ...]
    paths: bool

    def accepts(self, value: Any) -> bool:
        if not isinstance(value, str) or (self.paths and ".." in value):
            return False
        return any(value.startswith(prefix) for prefix in self.prefixes)

    def cel(self, field: str) -> str:
        tests = [f"{field}.startsWith({cel_literal(prefix)})" for prefix in self.prefixes]
        either = tests[0] if len(tests) == 1 else "(" + " || ".join(tests) + ")"
        return f'{either} && !{field}.contains("..")' if self.paths else either

    def narrowed(self, value: Any) -> list[Constraint]:
        rest = tuple(
            p for p in self.prefixes if not (isinstance(value, str) and value.startswith(p))
        )
        return [Prefixes(rest, self.paths)] if rest else []

    def describe(self) -> str:
        kind = "under" if self.paths else "on"
        return f"{kind} {', '.join(self.prefixes)}"


@dataclass(frozen=True)
class Shape:
    """An identifier of one character shape (``^[A-Z]+-[0-9]+$``); ``exact`` is the fallback
    when it has to be narrowed."""

    pattern: str
    exact: tuple[str, ...]

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and re.fullmatch(self.pattern[1:-1], value) is not None

    def cel(self, field: str) -> str:
        return f"{field}.matches({cel_literal(self.pattern)})"

    def narrowed(self, value: Any) -> list[Constraint]:
        return OneOf(self.exact).narrowed(value) if self.exact else []

    def describe(self) -> str:
        return f"identifier like {self.pattern}"


Constraint = OneOf | Range | Prefixes | Shape


def _repeated(values: Sequence[Any]) -> tuple[str, ...]:
    """The values approved at least twice, the ``MAX_VALUES`` most frequent of them."""
    counts = Counter(_text(value) for value in values)
    frequent = [text for text, count in counts.most_common(MAX_VALUES) if count >= 2]
    return tuple(sorted(frequent))


def _prefixes(values: Sequence[str], prefix_of: Any) -> tuple[str, ...]:
    counts = Counter(prefix_of(value) for value in values)
    return tuple(sorted(p for p, count in counts.items() if p is not None and count >= 2))


def _directory(path: str) -> str | None:
    if not path.startswith("/") or ".." in path:
        return None
    directory = path.rsplit("/", 1)[0] + "/"
    return directory if directory.count("/") >= 3 else None  # "/srv/docs/" or deeper


def _origin(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or "@" in parts.netloc:
        return None
    origin = f"{parts.scheme}://{parts.netloc}/"
    return origin if url.startswith(origin) else None


def _shape(value: str) -> str:
    classes = ["A" if c.isupper() else "a" if c.islower() else "9" if c.isdigit() else c
               for c in value]  # fmt: skip
    runs = [c for i, c in enumerate(classes) if i == 0 or c != classes[i - 1] or c not in "Aa9"]
    # Outside a character class only "." of the identifier characters needs an escape.
    return "^" + "".join(_SHAPE_CLASSES.get(c, "\\." if c == "." else c) for c in runs) + "$"


def _identifier_shape(values: Sequence[str]) -> str | None:
    if not all(_ID_CHARS.fullmatch(value) and value.isascii() for value in values):
        return None
    counts = Counter(values)
    # Many distinct values, none of them common: ids (orders, issues), not a few repeated
    # commands or names.
    if len(counts) < 3 or counts.most_common(1)[0][1] * 4 > len(values):
        return None
    if not all(any(char.isdigit() for char in value) for value in counts):
        return None
    distinct = set(counts)
    shapes = {_shape(value) for value in distinct}
    return shapes.pop() if len(shapes) == 1 and "[0-9]+" in next(iter(shapes)) else None


def learn(values: Sequence[Any]) -> Constraint | None:
    """The widest safe constraint that accepts approved ``values`` (``None``: nothing repeats,
    so no rule can cover them)."""
    distinct = {_text(value) for value in values}
    if len(distinct) == 1:
        return OneOf(tuple(distinct))
    if all(_number(value) for value in values):
        return Range(min(values), max(values))
    if all(isinstance(value, str) for value in values):
        texts: list[str] = list(values)
        if all(_directory(text) for text in texts):
            directories = _prefixes(texts, _directory)
            return Prefixes(directories, paths=True) if directories else None
        if all(_origin(text) for text in texts):
            origins = _prefixes(texts, _origin)
            return Prefixes(origins, paths=False) if origins else None
        shape = _identifier_shape(texts)
        if shape is not None:
            return Shape(shape, _repeated(texts))
    repeated = _repeated(values)
    return OneOf(repeated) if repeated else None
