"""Canonical JSON and the hashes built on it.

Canonical form (what the ledger hashes and compares):

* objects with keys sorted by code point, no insignificant whitespace, UTF-8, no ASCII escaping;
* only JSON types: ``dict`` with ``str`` keys, ``list``/``tuple``, ``str``, ``int``, ``float``,
  ``bool``, ``None``; anything else is refused rather than stringified;
* numbers are normalised after validation: a float with an integral value in the exactly
  representable range (|x| < 2**53) is written as an integer, ``-0.0`` as ``0``, other floats in
  Python's shortest round-trip form; NaN and Infinity are refused;
* strings are kept byte-for-byte (no Unicode normalisation), so what a human approved is exactly
  what runs.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from supervisor.errors import CanonicalJSONError

_EXACT_FLOAT_LIMIT = 2**53


class _Unusual(Exception):
    """Raised by :func:`_plain` on anything it leaves to the checked walk."""


def _plain(value: Any) -> Any:
    """:func:`normalise` for values made only of the exact JSON types, without building paths.

    Raises:
        _Unusual: a subclass of a JSON type, a non-JSON value, a non-string key, or a float
            that is not finite.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        plain: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _Unusual
            inner = type(item)  # strings, integers, booleans and nulls kept without a call
            plain[key] = (
                item
                if inner is str or inner is int or inner is bool or item is None
                else _plain(item)
            )
        return plain
    if kind is list or kind is tuple:
        return [item if type(item) is str or item is None else _plain(item) for item in value]
    if kind is float:
        if math.isnan(value) or math.isinf(value):
            raise _Unusual
        if value.is_integer() and abs(value) < _EXACT_FLOAT_LIMIT:
            return int(value)
        return value
    raise _Unusual


def normalise(value: Any, *, path: str = "$") -> Any:
    """Return ``value`` as plain JSON data with numbers normalised.

    Raises:
        CanonicalJSONError: ``value`` holds NaN, Infinity, a non-string key or a non-JSON type.
    """
    try:
        return _plain(value)
    except _Unusual:  # the walk below says where, or converts subclasses of the JSON types
        return _checked(value, path)


def _checked(value: Any, path: str) -> Any:
    """:func:`normalise`, naming the path of the first value that is not JSON data."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise CanonicalJSONError(
                f"{path} is {value!r}; NaN and Infinity have no JSON form.",
                hint="Send a finite number or null.",
                path=path,
            )
        if value.is_integer() and abs(value) < _EXACT_FLOAT_LIMIT:
            return int(value)
        return value
    if isinstance(value, dict):
        normalised: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalJSONError(
                    f"{path} has a non-string key {key!r}.",
                    hint="JSON object keys must be strings.",
                    path=path,
                )
            normalised[key] = _checked(item, f"{path}.{key}")
        return normalised
    if isinstance(value, (list, tuple)):
        return [_checked(item, f"{path}[{index}]") for index, item in enumerate(value)]
    raise CanonicalJSONError(
        f"{path} is a {type(value).__name__}, which is not JSON data.",
        hint="Convert it to a dict, list, string, number, boolean or null first.",
        path=path,
    )


#: What ``json.dumps`` builds on every call with these options, built once.
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _c_encode() -> Any:
    """``json``'s C encoder with :data:`_ENCODER`'s options, made once (``json.dumps`` makes
    one per call); ``None`` where this Python has none or it writes other text."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:  # no circular-reference markers: normalised values are freshly built trees
        encode = make(None, _refuse, json.encoder.encode_basestring, None, ":", ",",
                      True, False, False)  # fmt: skip
        sample: dict[str, Any] = {"b": [1, 2.5, None, True, 'é\n"', {}], "a": {"z": -0.5, "y": []}}
        if "".join(encode(sample, 0)) != _ENCODER.encode(sample):
            return None
    except Exception:
        return None
    return encode


_C_ENCODE = _c_encode()


def canonical_json(value: Any) -> str:
    """Serialise ``value`` in canonical form (see the module docstring)."""
    plain = normalise(value)
    if _C_ENCODE is None or type(plain) is str:
        return _ENCODER.encode(plain)
    return "".join(_C_ENCODE(plain, 0))


def sha256_hex(data: str | bytes) -> str:
    """SHA-256 of ``data`` (UTF-8 for text) as lowercase hex."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def canonical_hash(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value``."""
    return sha256_hex(canonical_json(value))


def args_hash(
    tool_name: str,
    schema_hash: str,
    arguments: dict[str, Any],
    execution_target: dict[str, Any] | None = None,
) -> str:
    """The hash an approval binds: tool, its contract, validated arguments and target.

    Args:
        tool_name: The governed tool's name.
        schema_hash: The tool's schema hash (its contract).
        arguments: Arguments after validation, as JSON data.
        execution_target: Where the call runs (sandbox, browser target, MCP server), if anywhere
            beyond the host process.

    Returns:
        Lowercase hex SHA-256 over the canonical JSON of all four.
    """
    return canonical_hash(
        {
            "tool": tool_name,
            "schema_hash": schema_hash,
            "arguments": arguments,
            "target": execution_target or {},
        }
    )
