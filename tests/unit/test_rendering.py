"""Which characters are shown as escapes, and that escaped JSON still means the same value."""

from __future__ import annotations

import itertools
import json
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.services import rendering
from supervisor.services.rendering import (
    dumps_visible,
    is_hidden,
    render_arguments,
    visible_escapes,
    visible_json,
)

HIDDEN = [
    pytest.param("\x1b", id="ESC"),
    pytest.param("\x07", id="BEL"),
    pytest.param("\x7f", id="DEL"),
    pytest.param("\x9b", id="C1-CSI"),
    pytest.param("\x85", id="C1-NEL"),
    pytest.param("\u202e", id="bidi-RLO"),
    pytest.param("\u2067", id="bidi-RLI"),
    pytest.param("\u200b", id="zero-width-space"),
    pytest.param("\u00ad", id="soft-hyphen"),
    pytest.param("\U000e0041", id="tag-A"),
    pytest.param("\u2028", id="line-separator"),
    pytest.param("\u00a0", id="NBSP"),
    pytest.param("\u2007", id="figure-space"),
    pytest.param("\u202f", id="narrow-NBSP"),
    pytest.param("\u3000", id="ideographic-space"),
    pytest.param("\u3164", id="hangul-filler"),
    pytest.param("\uffa0", id="halfwidth-hangul-filler"),
    pytest.param("\u115f", id="hangul-choseong-filler"),
    pytest.param("\u2800", id="braille-blank"),
    pytest.param("\u034f", id="combining-grapheme-joiner"),
    pytest.param("\ufe0f", id="variation-selector-16"),
    pytest.param("\U000e0100", id="variation-selector-17"),
    pytest.param("\u17b4", id="khmer-inherent-aq"),
    pytest.param("\u0338", id="overlay-long-solidus"),
    pytest.param("\u20d2", id="overlay-vertical-line"),
    pytest.param("\u20dd", id="enclosing-circle"),
    pytest.param("\u20e3", id="enclosing-keycap"),
    pytest.param("\u0489", id="cyrillic-enclosing"),
    pytest.param("\ue000", id="private-use"),
    pytest.param("\U0010ffff", id="noncharacter"),
]

LEGITIMATE = [
    pytest.param("नमस्ते दुनिया", id="devanagari-vowel-signs-virama"),
    pytest.param("Tiếng Việt", id="vietnamese-precomposed"),
    pytest.param(unicodedata.normalize("NFD", "Tiếng Việt"), id="vietnamese-combining"),
    pytest.param("שָׁלוֹם", id="hebrew-points"),
    pytest.param("مَرْحَبًا", id="arabic-harakat"),
    pytest.param("ภาษาไทย", id="thai"),
    pytest.param("日本語のテキスト", id="japanese"),
    pytest.param("한국어", id="korean"),
    pytest.param("Ελληνικά ά", id="greek"),
    pytest.param("café naïve", id="latin-diacritics"),
    pytest.param("😀 ✓ € ½", id="symbols"),
    pytest.param("plain ascii: a-z [0] {x} (y) /", id="ascii"),
]


@pytest.mark.parametrize("char", HIDDEN)
def test_hidden_characters_are_escaped(char: str) -> None:
    code = ord(char)
    expected = f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    assert visible_escapes(f"a{char}b") == f"a{expected}b"


@pytest.mark.parametrize("text", LEGITIMATE)
def test_letters_and_marks_of_every_script_are_left_alone(text: str) -> None:
    assert visible_escapes(text) == text
    assert render_arguments({"k": text}) == ["{", f'  "k": "{text}"', "}"]


def test_the_table_is_sorted_disjoint_and_covers_every_overlay_and_enclosing_mark() -> None:
    ranges = rendering._HIDDEN_PRINTABLE
    for (_, end), (start, _) in itertools.pairwise(ranges):
        assert end < start
    missing = [
        f"U+{code:04X}"
        for code in range(0x110000)
        if (unicodedata.category(chr(code)) == "Me" or unicodedata.combining(chr(code)) == 1)
        and not is_hidden(chr(code))
    ]
    assert missing == []
    for start, end in ranges:  # every listed code point is hidden, even if printable
        assert all(is_hidden(chr(code)) for code in range(start, end + 1))


def test_render_arguments_escapes_inside_values_line_by_line() -> None:
    lines = render_arguments({"to": "Bob\u00a0\u3164", "memo": "x\u0338"})
    assert lines == ["{", '  "memo": "x\\u0338",', '  "to": "Bob\\u00a0\\u3164"', "}"]


@given(st.text())
def test_visible_escapes_leaves_nothing_hidden(text: str) -> None:
    shown = visible_escapes(text)
    assert not any(is_hidden(char) for char in shown)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@given(JSON_VALUES, st.sampled_from([None, 2]))
def test_visible_json_round_trips_and_hides_nothing(value: object, indent: int | None) -> None:
    document = dumps_visible(value, indent=indent)
    assert json.loads(document) == value
    assert not any(is_hidden(char) for char in document if char not in "\n")


def test_visible_json_spells_astral_characters_as_surrogate_pairs() -> None:
    document = visible_json(json.dumps({"tag": "a\U000e0041"}, ensure_ascii=False))
    assert document == '{"tag": "a\\udb40\\udc41"}'
    assert json.loads(document) == {"tag": "a\U000e0041"}
    assert visible_json('{"del": "\x7f"}') == '{"del": "\\u007f"}'
