"""``parse_json_text``: the stores' JSON text parsed by pydantic-core, as ``json.loads`` parses it.

Every restore parses each row's content and metadata with it, so what it gives must be
exactly what ``json.loads`` gives -- the same values, of the same types, in new ``dict``
and ``list`` containers -- and whatever it does not take must raise ``Unusual`` (the
caller then takes ``json.loads``' path), never a value of its own.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.model.stored import Unusual, parse_json, parse_json_text
from tests.soak import examples

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**80), 2**80),
    st.floats(),  # NaN and the infinities too: json.dumps writes them, json.loads reads them
    st.text(),  # lone surrogates, non-ASCII, control characters
    st.text(alphabet=st.characters(codec="ascii"), max_size=20),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=25,
)


def _exact(value: Any) -> Any:
    """``value`` with every type and every float's bits spelled out (``==`` lets 1 == 1.0 == True, NaN != NaN)."""
    kind = type(value)
    if kind is list:
        return ("list", [_exact(v) for v in value])
    if kind is dict:
        return ("dict", [(type(k), k, _exact(v)) for k, v in value.items()])
    if kind is float:
        return ("float", struct.pack("<d", value) if not math.isnan(value) else "nan")
    return (kind.__name__, value)


def _texts(value: Any) -> list[str]:
    """The text as SQLite and PostgreSQL write it, as Redis writes it (compact), and unescaped."""
    return [json.dumps(value), json.dumps(value, separators=(",", ":")), json.dumps(value, ensure_ascii=False)]


@settings(max_examples=examples(400), deadline=None)
@given(_values)
def test_it_parses_what_json_loads_parses_or_leaves_it_to_json_loads(value: Any) -> None:
    for text in _texts(value):
        for given_text in (text, text.encode("ascii")) if text.isascii() else (text,):
            _parsed_as_json_loads_parses(given_text)


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=40))
def test_text_that_is_not_json_is_left_to_json_loads(text: str) -> None:
    _parsed_as_json_loads_parses(text)


def _parsed_as_json_loads_parses(text: str | bytes) -> None:
    """``parse_json_text(text)`` is ``json.loads(text)``, exactly, or raises ``Unusual``."""
    try:
        expected: Any = _exact(json.loads(text))
    except ValueError:
        expected = ValueError
    try:
        parsed = parse_json_text(text)
    except Unusual:
        return  # json.loads' path decides
    assert expected is not ValueError, f"parsed {text[:80]!r}, which json.loads refuses"
    assert _exact(parsed) == expected, repr(text[:200])


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud800"',  # a lone surrogate, escaped: json.loads gives it, pydantic-core does not
        '"a\ud800"',  # one in the text itself
        "[" * 300 + "]" * 300,  # deeper than pydantic-core nests
        "1" + "0" * 5000,  # more digits than int takes
        " [1]",
        "[1]\n",
        "",
        "[1] x",
        b"[\xc3\xa9]",  # bytes that are not ASCII: json.loads guesses their encoding
        bytearray(b"[1]"),
    ],
)
def test_what_it_does_not_take_raises_unusual(text: Any) -> None:
    with pytest.raises(Unusual):
        parse_json_text(text)


def test_each_parse_gives_new_containers() -> None:
    text = '[{"text": "hi"}]'
    first, second = parse_json_text(text), parse_json_text(text)
    assert first == second == [{"text": "hi"}]
    assert first is not second
    assert first[0] is not second[0]
    first[0]["text"] = "changed"
    assert parse_json_text(text) == [{"text": "hi"}]


# What the stores write for a message: no lone surrogate, numbers int and float take.
_stored_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**80), 2**80),
    st.floats(),
    st.text(alphabet=st.characters(exclude_categories=["Cs"])),
)
_stored = st.recursive(
    _stored_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=examples(300), deadline=None)
@given(_stored)
def test_what_the_stores_write_takes_the_fast_parse(value: Any) -> None:
    for text in _texts(value):
        assert _exact(parse_json_text(text)) == _exact(json.loads(text)), text[:200]


def _result(parse: Any, text: Any) -> Any:
    try:
        return _exact(parse(text))
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return (type(exc), str(exc))


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(_values.map(json.dumps), st.text(max_size=30), st.binary(max_size=30), _values.map(_texts)))
def test_parse_json_gives_the_value_or_the_error_json_loads_gives(text: Any) -> None:
    for each in text if isinstance(text, list) else [text]:
        assert _result(parse_json, each) == _result(json.loads, each), repr(each)[:200]
