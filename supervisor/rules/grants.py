"""What a grant ("approve and allow similar") matches: each argument exact or one pattern.

A grant is made from one pending call. For every argument of that call the operator keeps the
value exact or widens it to one pattern:

* ``{"exact": value}``: the same JSON value (``1`` and ``1.0`` and ``true`` are different);
* ``{"prefix": "/srv/app/"}``: a path under that directory, compared by components after
  normalising (``/srv/app2`` is not under ``/srv/app``; any ``..`` component never matches);
* ``{"origin": "https://example.com"}``: a URL whose origin, read by the WHATWG parser the
  browser uses (:func:`sandboxes.browser.urls.web_origin`), is that origin, so a URL that reads
  two ways (``https://example.com\\@evil``) never matches;
* ``{"range": [low, high]}``: a number with ``low <= value <= high`` (never a bool).

A call matches only when it has exactly the grant's argument names and each one matches, so an
argument the grant never saw cannot ride along.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Mapping
from typing import Any

from supervisor.errors import SupervisorError

PATTERN_KINDS = ("exact", "prefix", "origin", "range")
"""The ways a grant may hold one argument."""


class GrantInvalid(SupervisorError, ValueError):
    """A grant's argument patterns are not usable as written."""

    code = "invalid_grant"

    def __init__(self, problem: str) -> None:
        super().__init__(
            f"{problem}; no grant was made.",
            hint='Each argument is {exact = VALUE}, {prefix = "/dir/"}, '
            '{origin = "https://host"} or {range = [LOW, HIGH]} (see docs/policy.md, Grants).',
        )


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _path_parts(value: str) -> tuple[str, ...] | None:
    """The components of a normalised path, or ``None`` for one a grant never matches."""
    if not value or "\x00" in value or ".." in value.split("/"):
        return None
    return tuple(part for part in posixpath.normpath(value).split("/") if part)


def _origin(url: object) -> str | None:
    if not isinstance(url, str):
        return None
    from sandboxes.browser.urls import web_origin  # the browser's reading of a URL

    read = web_origin(url)
    return None if read is None else read.origin


def check_patterns(patterns: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The patterns of a new grant, checked against the call it is made from.

    Args:
        patterns: Argument name -> pattern; arguments not named stay exact.
        arguments: The validated arguments of the call the grant is made from.

    Returns:
        One pattern per argument of the call (canonical: an origin written as read).

    Raises:
        GrantInvalid: A pattern names an argument the call does not have, is malformed, or
            does not match the call it was made from.
    """
    unknown = sorted(set(patterns) - set(arguments))
    if unknown:
        raise GrantInvalid(f"the call has no argument {unknown[0]!r}")
    checked: dict[str, Any] = {}
    for name, value in arguments.items():
        pattern = patterns.get(name, {"exact": value})
        if not isinstance(pattern, Mapping) or len(pattern) != 1:
            raise GrantInvalid(f"argument {name!r}: a pattern is one of {', '.join(PATTERN_KINDS)}")
        ((kind, spec),) = pattern.items()
        if kind == "prefix":
            parts = _path_parts(spec) if isinstance(spec, str) else None
            if not parts or not spec.startswith("/"):
                raise GrantInvalid(f"argument {name!r}: prefix must be an absolute directory")
            spec = "/" + "/".join(parts) + "/"
        elif kind == "origin":
            origin = _origin(spec)
            if origin is None:
                raise GrantInvalid(f"argument {name!r}: origin must be an http(s) URL")
            spec = origin
        elif kind == "range":
            if (not isinstance(spec, list) or len(spec) != 2 or not all(map(_number, spec))
                    or spec[0] > spec[1]):  # fmt: skip
                raise GrantInvalid(f"argument {name!r}: range must be [low, high] numbers")
        elif kind != "exact":
            raise GrantInvalid(f"argument {name!r}: unknown pattern {kind!r}")
        if not matches_pattern({kind: spec}, value):
            raise GrantInvalid(f"argument {name!r}: the pattern does not match the call's value")
        checked[name] = {kind: spec}
    return checked


def matches_pattern(pattern: Mapping[str, Any], value: Any) -> bool:
    """``value`` matches one checked pattern (see the module docstring)."""
    ((kind, spec),) = pattern.items()
    if kind == "exact":
        return type(value) is type(spec) and bool(value == spec)
    if kind == "prefix":
        parts = _path_parts(value) if isinstance(value, str) and value.startswith("/") else None
        wanted = tuple(part for part in spec.split("/") if part)
        return parts is not None and parts[: len(wanted)] == wanted
    if kind == "origin":
        return bool(_origin(value) == spec)
    if kind == "range":
        return _number(value) and bool(spec[0] <= value <= spec[1])
    return False


def grant_matches(patterns: Mapping[str, Any], arguments: Mapping[str, Any]) -> bool:
    """The call's arguments are exactly the grant's argument names, each matching."""
    if set(patterns) != set(arguments):
        return False
    return all(matches_pattern(patterns[name], arguments[name]) for name in patterns)
