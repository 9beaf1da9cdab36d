"""Canonical JSON: the exact bytes the args hash binds."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.canonical import args_hash, canonical_hash, canonical_json, normalise
from supervisor.errors import CanonicalJSONError

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)


def test_keys_sorted_and_compact() -> None:
    assert canonical_json({"b": 1, "a": [1, 2], "c": {"z": None, "y": True}}) == (
        '{"a":[1,2],"b":1,"c":{"y":true,"z":null}}'
    )


def test_key_order_does_not_change_the_hash() -> None:
    assert canonical_hash({"a": 1, "b": 2}) == canonical_hash({"b": 2, "a": 1})


def test_unicode_is_kept_not_escaped_or_normalised() -> None:
    composed, decomposed = "Zo\u00eb", "Zoe\u0308"
    assert canonical_json({"n": composed}) == '{"n":"Zoë"}'
    assert canonical_json(composed).encode("utf-8") == b'"Zo\xc3\xab"'
    assert canonical_hash(composed) != canonical_hash(decomposed)


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1"), (-0.0, "0"), (0.0, "0"), (2.5, "2.5"), (1e20, "1e+20"),
     (2.0**53, "9007199254740992.0"), (0.1, "0.1"), (True, "true"), (10**30, str(10**30))],
)  # fmt: skip
def test_numbers_are_normalised(value: Any, text: str) -> None:
    assert canonical_json(value) == text


def test_integral_floats_hash_like_ints() -> None:
    assert args_hash("t", "s", {"n": 3.0}) == args_hash("t", "s", {"n": 3})
    assert args_hash("t", "s", {"n": 3.5}) != args_hash("t", "s", {"n": 3})


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused(bad: float) -> None:
    with pytest.raises(CanonicalJSONError) as caught:
        canonical_json({"outer": [1, {"x": bad}]})
    assert caught.value.code == "not_canonical_json"
    assert "$.outer[1].x" in str(caught.value)


@pytest.mark.parametrize("bad", [{1: "int key"}, {"s": {1, 2}}, {"b": b"bytes"}, object()])
def test_non_json_values_are_refused(bad: Any) -> None:
    with pytest.raises(CanonicalJSONError):
        canonical_json(bad)


def test_args_hash_binds_every_part() -> None:
    base = args_hash("tool", "schema", {"a": 1}, {"sandbox": "s1"})
    assert base == args_hash("tool", "schema", {"a": 1}, {"sandbox": "s1"})
    assert len({
        base,
        args_hash("tool2", "schema", {"a": 1}, {"sandbox": "s1"}),
        args_hash("tool", "schema2", {"a": 1}, {"sandbox": "s1"}),
        args_hash("tool", "schema", {"a": 2}, {"sandbox": "s1"}),
        args_hash("tool", "schema", {"a": 1}, {"sandbox": "s2"}),
    }) == 5  # fmt: skip
    assert args_hash("t", "s", {}, None) == args_hash("t", "s", {}, {})


@given(json_values)
def test_round_trip_is_a_fixed_point(value: Any) -> None:
    text = canonical_json(value)
    parsed = json.loads(text)
    assert parsed == normalise(value)
    assert canonical_json(parsed) == text


@given(st.dictionaries(st.text(max_size=6), st.integers(), min_size=2, max_size=8))
def test_insertion_order_never_matters(mapping: dict[str, int]) -> None:
    reversed_mapping = dict(reversed(list(mapping.items())))
    assert canonical_json(mapping) == canonical_json(reversed_mapping)


class _Level(enum.IntEnum):
    HIGH = 3


class _Name(str):
    pass


def test_subclasses_of_json_types_normalise_like_their_base() -> None:
    """Values that are not exactly the JSON types take the checked walk, with its results."""
    value = {"level": _Level.HIGH, "name": _Name("ada"), "nested": ({"n": 2.0},)}
    normalised = normalise(value)
    assert normalised == {"level": 3, "name": "ada", "nested": [{"n": 2}]}
    assert type(normalised["level"]) is int
    assert canonical_json(value) == '{"level":3,"name":"ada","nested":[{"n":2}]}'


def test_a_refusal_names_the_path_deep_inside_plain_data() -> None:
    with pytest.raises(CanonicalJSONError) as caught:
        normalise({"a": [{"b": 1}, {"c": [1, 2, {"d": object()}]}]})
    assert "$.a[1].c[2].d" in str(caught.value)


@given(json_values)
def test_the_text_is_json_dumps_of_the_checked_walk(value: Any) -> None:
    from supervisor.canonical import _checked

    expected = json.dumps(
        _checked(value, "$"), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
        allow_nan=False,
    )  # fmt: skip
    assert canonical_json(value) == expected
    assert normalise(value) == _checked(value, "$")
